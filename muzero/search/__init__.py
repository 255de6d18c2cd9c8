"""Searches: the reference MCTS and its batched twins, and the one place that picks one.

* `reference.py`: the pseudocode's search in plain Python (`run_mcts`, `select_child`,
  `ucb_score`, `expand_node`, `backpropagate`, `add_exploration_noise`, `select_action`);
  the definition every faster search is tested equal to.
* `batched.py`: `run_batched_mcts`, B trees as numpy arrays (`BatchedSearcher`).
* `compiled.py`: the same as one TensorFlow graph, XLA optional (`CompiledSearch`).
* `compiled_searcher.py`: `CompiledSearcher`, the compiled search on a Keras twin of the
  published network, for self-play.
* `gumbel.py`: Gumbel MuZero's search (`search.algorithm: gumbel`), the reference in plain
  Python (`run_gumbel_mcts`), tested equal to mctx; `compiled_gumbel.py`: the same as a
  compiled search (`CompiledGumbelSearch`), tested equal to it. Both searchers above run
  Gumbel MuZero when the `search` section asks for it.
* `types.py`: `SearchResult` and the `Searcher` protocol.

TensorFlow is imported only when the compiled search is made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from muzero.search.batched import BatchedSearcher, run_batched_mcts
from muzero.search.types import Searcher, SearchResult

if TYPE_CHECKING:
    from muzero.config import SearchConfig, SelfPlayConfig
    from muzero.envs import EnvironmentSpec
    from muzero.networks.keras import KerasNetwork

# The pseudocode's names (`run_mcts`, `ucb_score`, ...) are in `muzero.search.reference`,
# and importable as `from muzero import run_mcts`.
__all__ = ["BatchedSearcher", "SearchResult", "Searcher", "make_searcher", "run_batched_mcts"]


def make_searcher(
    search: SearchConfig,
    selfplay: SelfPlayConfig,
    discount: float,
    batch_size: int,
    spec: EnvironmentSpec,
    network_factory: Callable[[], KerasNetwork] | None = None,
) -> Searcher:
    """The searcher `selfplay.search` names, for `batch_size` games at once: "numpy"
    (`run_batched_mcts`) or "compiled" (one TensorFlow graph on a Keras twin of the network,
    which `network_factory` builds).

    Self-play, evaluation, Reanalyse and the Ray actors all choose here.
    """
    if selfplay.search == "compiled":
        from muzero.search.compiled_searcher import CompiledSearcher

        if network_factory is None:
            raise ValueError("selfplay.search compiled needs a network factory for its Keras twin")
        return CompiledSearcher(
            search, discount, network_factory, batch_size, spec.num_players, jit_compile=selfplay.jit_compile
        )
    return BatchedSearcher(search, discount, spec.num_players)
