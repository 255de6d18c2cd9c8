"""Replay (pseudocode `ReplayBuffer`): the window of games, sampled into training batches.

* `buffer`: `ReplayBuffer`, the window of the newest games, `save_game`, `sample_batch`,
  prioritized replay's priorities, Reanalyse's choice of positions and its stored results,
  and the `state_dict` a checkpoint keeps; thread-safe (one lock).
* `prefetch`: `BatchPrefetcher`, the next batch built on a thread beside the learner.
* `flat`: `FlatGames`, the window as flat arrays; the n-step value targets of many positions
  at once (`n_step_values`), the positions' priorities and prioritized sampling.
* `targets`: the training `Batch` and `make_target` for a batch (`make_batch`, the readable
  definition, and `make_batch_vectorized`, tested equal to it).
"""

from muzero.replay.buffer import Positions, ReplayBuffer, Sample
from muzero.replay.flat import FlatGames, n_step_values, priority, stack_images
from muzero.replay.targets import Batch, make_batch, make_batch_vectorized, unroll_observations

__all__ = [
    "Batch",
    "FlatGames",
    "Positions",
    "ReplayBuffer",
    "Sample",
    "make_batch",
    "make_batch_vectorized",
    "n_step_values",
    "priority",
    "stack_images",
    "unroll_observations",
]
