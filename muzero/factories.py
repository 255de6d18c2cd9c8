"""The config unpacked into the parts' constructors: each part gets its own section(s).

With `muzero.builder` (which assembles a whole run from these), this is where code outside
the CLI and config loading reads across the whole `MuZeroConfig`; the parts themselves (`Learner`, `ReplayBuffer`, the
searches, the networks) take sections or explicit values. It sits below the self-play, actor
and evaluation modules, so that a Ray actor, which builds its own parts in its own process,
builds them here too, as `muzero train` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from muzero.config import MuZeroConfig
from muzero.envs import Environment, EnvironmentSpec
from muzero.reanalyse import reanalyse_enabled
from muzero.replay import ReplayBuffer
from muzero.search import Searcher, make_searcher
from muzero.selfplay import BatchedSelfPlay

if TYPE_CHECKING:
    from muzero.networks.keras import KerasNetwork
    from muzero.training import Learner


def network_factory(
    config: MuZeroConfig, spec: EnvironmentSpec, for_search: bool = False
) -> Callable[[], KerasNetwork]:
    """Builds the Keras network the `network` section describes for `spec`.

    Args:
      for_search: a searcher's twin of the network: float32 on a machine without a GPU
        (bfloat16 is emulated, slowly, on CPUs; the published weights are float32 either way).
    """
    network, stacked_frames, mixed_precision = config.network, config.game.stacked_frames, config.train.mixed_precision

    def make() -> KerasNetwork:
        # Imports TensorFlow only when a network is made (a numpy searcher never makes one).
        import tensorflow as tf

        from muzero.networks import make_network

        bfloat16 = mixed_precision and not (for_search and not tf.config.list_physical_devices("GPU"))
        return make_network(network, spec, stacked_frames, bfloat16)

    return make


def make_run_network(config: MuZeroConfig, spec: EnvironmentSpec) -> KerasNetwork:
    """The learner's network for the `network` section and the game `spec`."""
    return network_factory(config, spec)()


def make_run_searcher(config: MuZeroConfig, spec: EnvironmentSpec, batch_size: int) -> Searcher:
    """The searcher `selfplay.search` names for `batch_size` rows (`muzero.search.make_searcher`)."""
    return make_searcher(
        config.search, config.selfplay, config.discount, batch_size, spec, network_factory(config, spec, True)
    )


def make_learner(config: MuZeroConfig, network: KerasNetwork) -> Learner:
    """`update_weights` with the `train` section's optimizer, for `network`."""
    from muzero.training import Learner

    return Learner(config.train, network, value_td_steps(config), config.run.grad_summary_interval)


def value_td_steps(config: MuZeroConfig) -> int:
    """n of the learner's n-step value targets: `reanalyse.td_steps` while Reanalyse is on (they bootstrap
    from the target network), else `train.td_steps`. New games' initial priorities use the same n."""
    return config.reanalyse.td_steps if reanalyse_enabled(config.reanalyse) else config.train.td_steps


def make_replay_buffer(config: MuZeroConfig, spec: EnvironmentSpec, rng: np.random.Generator) -> ReplayBuffer:
    """The replay buffer of the `replay` section, sampling batches for the `train` section."""
    return ReplayBuffer(
        config.replay,
        rng,
        batch_size=config.train.batch_size,
        action_space_size=config.action_space_size,
        td_steps=value_td_steps(config),
        discount=config.discount,
        reanalyse_fraction=config.reanalyse.fraction,
        num_unroll_steps=config.train.num_unroll_steps,
        with_unroll_observations=config.train.consistency_loss_weight > 0,
        symmetries=spec.symmetries,
    )


def make_batched_selfplay(config: MuZeroConfig, environments: list[Environment], searcher: Searcher) -> BatchedSelfPlay:
    """A game in progress in each of `environments`, one batched search per move for all of them."""
    segment = None
    if config.selfplay.segment_length:  # the moves a position's targets reach past it
        following = config.train.num_unroll_steps + max(config.train.td_steps, config.reanalyse.td_steps)
        segment = (config.selfplay.segment_length, following)
    return BatchedSelfPlay(
        config.game,
        config.search,
        environments,
        searcher,
        random_opening_moves=config.selfplay.random_opening_moves,
        segment=segment,
        random_moves_before_step=config.selfplay.random_moves_before_step,
        uniform_random_targets=config.selfplay.random_move_policy_target == "uniform",
    )
