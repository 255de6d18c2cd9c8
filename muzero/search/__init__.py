"""Searches: the reference MCTS and its batched twins, and the one place that picks one.

* `reference.py`: the pseudocode's search in plain Python (`run_mcts`, `select_child`,
  `ucb_score`, `expand_node`, `backpropagate`, `add_exploration_noise`, `select_action`);
  the definition every faster search is tested equal to.
* `batched.py`: `run_batched_mcts`, B trees as numpy arrays (`BatchedSearcher`).
* `compiled.py`: the same as one TensorFlow graph, XLA optional (`CompiledSearcher`).
* `types.py`: `SearchResult` and the `Searcher` protocol.

TensorFlow is imported only when the compiled search is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from muzero.search.batched import BatchedSearcher, run_batched_mcts
from muzero.search.types import Searcher, SearchResult

if TYPE_CHECKING:
    from muzero.config import MuZeroConfig

# The pseudocode's names (`run_mcts`, `ucb_score`, ...) are in `muzero.search.reference`,
# and importable as `from muzero import run_mcts`.
__all__ = ["BatchedSearcher", "SearchResult", "Searcher", "make_searcher", "run_batched_mcts"]


def make_searcher(
    config: MuZeroConfig,
    batch_size: int,
    observation_shape: tuple[int, ...],
    observation_dtype: type = np.float32,
    num_players: int = 1,
) -> Searcher:
    """The searcher `selfplay.search` names, for `batch_size` games at once: "numpy"
    (`run_batched_mcts`) or "compiled" (one TensorFlow graph on a Keras copy of the network).

    Self-play, evaluation and the Ray actors all choose here.
    """
    if config.selfplay.search == "compiled":
        from muzero.search.compiled import CompiledSearcher

        return CompiledSearcher(config, observation_shape, batch_size, observation_dtype, num_players)
    return BatchedSearcher(config.search, config.discount, num_players)
