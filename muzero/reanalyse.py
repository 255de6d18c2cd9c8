"""MuZero Reanalyze (paper appendix): fresher targets for the positions already in replay.

Three parts, as in the paper:

* `reanalyse_positions`: the search is run again, with the newest network, on positions
  stored in replay; their root visit distributions (Gumbel: the improved policies) are
  written back (`ReplayBuffer.store_reanalysis`); their root values are not kept, as the
  value targets come from θ⁻ (below). Root noise as self-play's unless `reanalyse.root_noise`
  is off (EfficientZero's reanalysis adds it too).
* Policy targets: the first `reanalyse.fraction` of each sampled batch takes them from the
  reanalysed statistics (`ReplayBuffer.sample_batch`).
* Value targets bootstrap, `reanalyse.td_steps` steps ahead, from a target network θ⁻,
  a copy of the weights refreshed every `reanalyse.target_network_interval` training
  steps (`TargetNetwork`).

Which positions: those whose statistics are the oldest (by the learner's training step
when they reached replay: their game's arrival when never reanalysed, else their last
reanalysis's; one clock on both back ends), the oldest game first,
so the whole window is swept again and again. `LocalReanalyse` does it in this process,
`reanalyse.positions_per_step` positions per training step, in batches of
`reanalyse.batch_size`; `muzero.reanalyse_actors.RayReanalyse` on Ray actors.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from muzero.config import ReanalyseConfig
from muzero.networks.base import Network, PublishedWeights, UniformNetwork
from muzero.replay import Positions, ReplayBuffer
from muzero.search.types import Searcher, SearchResult
from muzero.selfplay import root_noise
from muzero.symmetries import Symmetry, search_roots

if TYPE_CHECKING:
    from muzero.networks.keras import KerasNetwork

# Seeds Reanalyse's noise: (run seed, this), apart from every other stream of the run.
REANALYSE_STREAM = 7


def reanalyse_enabled(reanalyse: ReanalyseConfig) -> bool:
    """Reanalyse is on when a fraction of the policy targets comes from it (`reanalyse.fraction`)."""
    return reanalyse.fraction > 0


def select_positions(
    replay_buffer: ReplayBuffer, count: int, exclude: list[tuple[int, np.ndarray]] = ()
) -> Positions | None:
    """The `count` positions in the window whose search statistics are the oldest (ties: the
    oldest game first, then the earlier move); None when there are none
    (`ReplayBuffer.positions_to_reanalyse`).

    Args:
      exclude: (layout, rows) of positions out for reanalysis already (Ray calls in flight).
    """
    return replay_buffer.positions_to_reanalyse(count, exclude)


# Why: a position searched long ago by an older network has a policy target that the
# newest network would no longer pick; searching it again with that network gives a
# better target for the same stored data (the paper's Reanalyze).
def reanalyse_positions(
    searcher: Searcher,
    network: Network,
    positions: Positions,
    noise: np.ndarray | None = None,
    symmetries: tuple[Symmetry, ...] = (),
    rng: np.random.Generator | None = None,
) -> SearchResult:
    """The search (`run_mcts` for each root, batched) on stored positions.

    Args:
      noise: [N, A] Dirichlet samples mixed into the root priors as in self-play
        (`reanalyse.root_noise`), or None.
      symmetries, rng: with `search.random_symmetry`, each position searched from an image
        drawn with `rng` (`muzero.symmetries.search_roots`).

    Returns:
      visit counts [N, A] and root values [N].
    """
    network = searcher.bind(network)
    observation, legal, to_play = positions.observation, positions.legal, positions.to_play
    return search_roots(searcher, network, observation, legal, to_play, noise, symmetries, rng)


def reanalyse_noise(
    root_dirichlet_alpha: float | None, positions: Positions, rng: np.random.Generator
) -> np.ndarray | None:
    """Root noise for a reanalyse search, Dirichlet(`search.root_dirichlet_alpha`) as in
    self-play: [N, A], or None when `root_dirichlet_alpha` is (`reanalyse.root_noise` off)."""
    if root_dirichlet_alpha is None:
        return None
    return root_noise(root_dirichlet_alpha, positions.legal, rng)


class TargetNetwork:
    """θ⁻: the weights value targets bootstrap from, refreshed every `interval` training steps.

    Holds a Keras copy of the learner's network; values come from its numpy mirror (MLP)
    or a compiled `initial_inference` (resnet). A lock keeps a refresh from changing the
    weights while the learner's prefetching thread reads values for a batch: without it a
    batch could bootstrap from half-copied weights.

    Args:
      interval: `reanalyse.target_network_interval`.
      network_factory: builds a Keras network of the learner's kind and shapes.
    """

    def __init__(self, interval: int, network_factory: Callable[[], KerasNetwork]):
        import tensorflow as tf

        self.interval = interval
        self.keras_network = network_factory()
        self.step = -1
        self._numpy: Network | None = None
        self.lock = threading.Lock()
        self._initial = tf.function(
            lambda x: self.keras_network.initial_inference(x).value,
            input_signature=[self.keras_network.observation_spec],
        )

    def maybe_refresh(self, step: int, network) -> bool:
        """At the first call and every `interval` training steps, copies the weights of
        `network` (the learner's Keras network); returns whether it did."""
        if self.step >= 0 and step % self.interval != 0:
            return False
        self._load(network.get_weights(), step)
        return True

    def values(self, observation: np.ndarray) -> np.ndarray:
        """θ⁻'s value of each observation: [N, *image_shape] -> [N] float64."""
        with self.lock:
            return self._values(observation)

    def _values(self, observation: np.ndarray) -> np.ndarray:
        if isinstance(self._numpy, PublishedWeights):
            return np.asarray(self._initial(observation), np.float64)
        return np.asarray(self._numpy.initial_inference(observation).value, np.float64)

    def _load(self, weights: dict, step: int) -> None:
        with self.lock:
            self.keras_network.set_weights(weights)
            self.step = step
            self._numpy = self.keras_network.published_network(step)

    def state_dict(self) -> dict:
        return {"weights": self.keras_network.get_weights(), "step": self.step}

    def load_state_dict(self, state: dict) -> None:
        self._load(state["weights"], state["step"])

    def restore(self, saved: dict | None, step: int, network) -> None:
        """θ⁻ as a checkpoint at training step `step` left it: `saved` (its `state_dict`), or,
        for a checkpoint from before Reanalyse was turned on (`saved` None), a copy of the
        restored `network`, as the run's first refresh would have made."""
        if saved is None:
            self._load(network.get_weights(), step)
        else:
            self.load_state_dict(saved)


class ReanalyseDriver:
    """What the two ways of running Reanalyse share: `reanalyse.positions_per_step` positions
    of budget per training step (carried over as credit, spent a `batch_size` batch at a
    time), the results stored into replay, their summaries and the checkpointed credit.

    Args:
      reanalyse: the `reanalyse` section (`positions_per_step`, `batch_size`).
    """

    def __init__(self, reanalyse: ReanalyseConfig):
        self.positions_per_step = reanalyse.positions_per_step
        self.batch_size = reanalyse.batch_size
        self.credit = 0.0
        self.positions = 0
        self.ages: list[float] = []

    def _add_budget(self, network: Network) -> bool:
        """Adds one training step's budget; whether `network` is worth searching with (the
        uniform network published before the first save finds no better targets)."""
        self.credit += self.positions_per_step
        return not isinstance(network, UniformNetwork)

    def _store(
        self, replay_buffer: ReplayBuffer, rows: np.ndarray, layout: int, result: SearchResult, step: int
    ) -> None:
        """Writes one batch's results into replay and counts them."""
        self.ages.append(replay_buffer.store_reanalysis(rows, layout, result, step))
        self.positions += len(rows)

    def metrics(self, replay_buffer: ReplayBuffer) -> dict[str, float]:
        """`reanalyse/...` summaries since the last call."""
        out = {"reanalyse/fraction_reanalysed": replay_buffer.fraction_reanalysed()}
        ages = [age for age in self.ages if not np.isnan(age)]  # NaN: the rows moved, nothing stored
        if ages:
            out["reanalyse/replaced_age"] = float(np.mean(ages))
        self.positions, self.ages = 0, []
        return out

    def state_dict(self) -> dict:
        return {"credit": self.credit}

    def load_state_dict(self, state: dict) -> None:
        self.credit = state["credit"]


class LocalReanalyse(ReanalyseDriver):
    """Reanalyse in this process, between training steps, searched `batch_size` positions at
    a time with the newest published network.

    Args:
      reanalyse: the `reanalyse` section.
      searcher: a batched searcher for `reanalyse.batch_size` positions
        (`muzero.search.make_searcher`).
      seed: the run's seed (`run.seed`).
      root_dirichlet_alpha: `search.root_dirichlet_alpha`, the root noise's (with `reanalyse.root_noise`);
        None: no noise.
      symmetries: the game's, with `search.random_symmetry` (drawn from the noise's stream); else ().
    """

    def __init__(
        self,
        reanalyse: ReanalyseConfig,
        searcher: Searcher,
        seed: int,
        root_dirichlet_alpha: float | None,
        symmetries: tuple[Symmetry, ...] = (),
    ):
        super().__init__(reanalyse)
        self.searcher, self.symmetries = searcher, symmetries
        self.noise_alpha = root_dirichlet_alpha if reanalyse.root_noise else None
        # Root noise: its own stream, so self-play draws what it would without Reanalyse.
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, REANALYSE_STREAM]))
        self.seconds = 0.0

    def after_training_step(self, replay_buffer: ReplayBuffer, network: Network, step: int) -> None:
        """Adds one step's budget; searches a batch whenever a whole one is due."""
        if not self._add_budget(network):
            return
        while self.credit >= self.batch_size:
            self.credit -= self.batch_size
            started = time.perf_counter()
            positions = select_positions(replay_buffer, self.batch_size)
            if positions is None:
                return
            noise = reanalyse_noise(self.noise_alpha, positions, self.rng)
            result = reanalyse_positions(self.searcher, network, positions, noise, self.symmetries, self.rng)
            self._store(replay_buffer, positions.rows, positions.layout, result, step)
            self.seconds += time.perf_counter() - started

    def metrics(self, replay_buffer: ReplayBuffer) -> dict[str, float]:
        """`reanalyse/...` summaries since the last call; positions/s over search time."""
        speed = {"reanalyse/positions_per_sec": self.positions / self.seconds} if self.seconds > 0 else {}
        self.seconds = 0.0
        return {**super().metrics(replay_buffer), **speed}

    def state_dict(self) -> dict:
        return {**super().state_dict(), "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.rng.bit_generator.state = state["rng"]

    def close(self) -> None:
        """Nothing to stop in this process."""
