"""The builder: a run's parts made from its config, in one place.

The pseudocode's `muzero(config)` makes a `SharedStorage` and a `ReplayBuffer`, starts the
actors and trains. Here `build_run` makes every part a run needs (the learner's network and
`Learner`, the shared storage, replay, the self-play source, Reanalyse with its target
network, the checkpointer, the evaluator and the TensorBoard telemetry) and hands them back in
one `RunParts`, restored from the newest complete checkpoint when resuming. It is the only
module that unpacks the whole `MuZeroConfig` for the loop: every part gets its own section(s)
or explicit values, and `muzero.runner.Trainer` only runs the loop over the parts.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from absl import logging

from muzero.config import MuZeroConfig
from muzero.config_io import config_to_dict, config_to_yaml
from muzero.envs import EnvironmentSpec, make_environments
from muzero.evaluation import Evaluator
from muzero.factories import (
    make_batched_selfplay,
    make_learner,
    make_replay_buffer,
    make_run_network,
    make_run_searcher,
    network_factory,
)
from muzero.greedy import make_greedy_player, with_eval_simulations
from muzero.reanalyse import LocalReanalyse, TargetNetwork, reanalyse_enabled
from muzero.replay import Batch, ReplayBuffer
from muzero.replay.journal import GameJournal
from muzero.run_dir import CHECKPOINT_DIR, CONFIG_FILE, JOURNAL_DIR, lock_run_dir, write_atomically
from muzero.run_state import RunState, seed_everything
from muzero.runner import LoopSettings, Trainer
from muzero.selfplay import LocalSelfPlay, SelfPlaySource, play_game
from muzero.storage import SharedStorage
from muzero.tf_runtime import configure_devices

if TYPE_CHECKING:
    from muzero.checkpoints import Checkpointer
    from muzero.networks.keras import KerasNetwork
    from muzero.training import Learner


@dataclass
class RunParts:
    """Everything a training run is made of; `state_dict` is everything a resume restores.

    Attributes:
      spec: what the game is.
      state: RNGs and counters (`muzero.run_state.RunState`).
      network: the learner's Keras network.
      learner: `update_weights` and its optimizer.
      storage: the pseudocode's `SharedStorage`: the network self-play and evaluation use.
      replay_buffer: the pseudocode's `ReplayBuffer`.
      source: self-play, in this process or on Ray actors.
      target_network: θ⁻ for Reanalyse's value targets; None without Reanalyse.
      reanalyser: Reanalyse in this process or on actors; None without it.
      checkpointer: the run's crash-safe checkpoints.
      evaluator: greedy evaluation (and board-game matches) into eval.csv and TensorBoard.
      journal: the concurrent loop's finished games, for a resume after a kill.
      backend: where self-play runs ("local" or "ray"), recorded for `--resume`.
    """

    spec: EnvironmentSpec
    state: RunState
    network: KerasNetwork
    learner: Learner
    storage: SharedStorage
    replay_buffer: ReplayBuffer
    source: SelfPlaySource
    target_network: TargetNetwork | None
    reanalyser: Any
    checkpointer: Checkpointer
    evaluator: Evaluator
    journal: GameJournal
    backend: str = "local"

    def state_dict(self) -> dict:
        """What a checkpoint holds besides the TensorFlow variables."""
        environments, games = self.source.state()
        eval_rng, eval_environments = self.evaluator.checkpoint_state()
        state = self.state.state_dict(
            eval_rng, (environments, eval_environments), games, self.replay_buffer.state_dict()
        )
        if self.reanalyser is not None:
            state["reanalyse"] = {
                "target_network": self.target_network.state_dict(),
                "worker": self.reanalyser.state_dict(),
            }
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restores `state_dict`'s output (the TensorFlow variables are restored by the checkpointer)."""
        self.state.load_state_dict(state, self.evaluator.rng)
        environments, self.evaluator.environments = state["environments"]
        self.source.load_state(environments, state["games_in_progress"])
        self.replay_buffer.load_state_dict(state["replay"])
        self.network.steps = self.learner.training_step
        if self.reanalyser is not None:  # "reanalyse" is absent from a checkpoint from before it was on
            saved = state.get("reanalyse")
            self.target_network.restore(saved and saved["target_network"], self.learner.training_step, self.network)
            if saved is not None:
                self.reanalyser.load_state_dict(saved["worker"])

    def close(self) -> None:
        """Stops what runs beside the learner (actors, Reanalyse)."""
        if self.reanalyser is not None:
            self.reanalyser.close()
        self.source.close()


def with_actor_count(config: MuZeroConfig, ray_address: str | None) -> MuZeroConfig:
    """`actors.num_actors: 0` made a count: one self-play actor per core of this machine (or
    per CPU of the cluster at `ray_address`), less the reanalyse actors, at least one.

    One per core, not one per core left beside the learner: whichever side is the slower,
    the other's cores then still have work (measured: docs/concurrency.md)."""
    if config.actors.num_actors:
        return config
    if ray_address is None:
        cpus = os.cpu_count() or 1
    else:
        import ray

        from muzero.actor_pool import connect

        connect(ray_address, 0.0)
        cpus = int(ray.cluster_resources().get("CPU", 1))
    reanalysers = config.reanalyse.num_actors if reanalyse_enabled(config.reanalyse) else 0
    count = max(1, cpus - reanalysers)
    logging.info("self-play actors: %d (actors.num_actors: 0, one per core)", count)
    actors = dataclasses.replace(
        config.actors, num_actors=count, min_live_actors=min(config.actors.min_live_actors, count)
    )
    return config.replace(actors=actors)


def make_selfplay_source(
    config: MuZeroConfig, spec: EnvironmentSpec, backend: str, ray_address: str | None, seed: int
) -> SelfPlaySource:
    """Self-play in this process ("local") or on Ray actors ("ray": `muzero.actors`)."""
    if backend == "ray":
        from muzero.actors import RaySelfPlay, cluster_cpus

        cpus = cluster_cpus(config.actors, config.reanalyse)
        return RaySelfPlay(config.actors, (config, spec), config.selfplay.num_envs, ray_address, cpus)
    batched = config.selfplay.batched
    environments = make_environments(config.game, config.selfplay.num_envs if batched else 1, seed)
    if not batched:
        return LocalSelfPlay(environments, play_one_game=functools.partial(play_game, config))
    searcher = make_run_searcher(config, spec, config.selfplay.num_envs)
    selfplay = make_batched_selfplay(config, environments, searcher)
    return LocalSelfPlay(environments, selfplay, refresh_interval=config.selfplay.refresh_interval)


def make_reanalyser(config: MuZeroConfig, spec: EnvironmentSpec, backend: str, ray_address: str | None):
    """Reanalyse on actors ("ray" with `reanalyse.num_actors` > 0: `RayReanalyse`), or in this
    process between training steps (`LocalReanalyse`)."""
    if backend == "ray" and config.reanalyse.num_actors > 0:
        from muzero.reanalyse_actors import RayReanalyse

        return RayReanalyse(config.reanalyse, config.actors, (config, spec), ray_address)
    searcher = make_run_searcher(config, spec, config.reanalyse.batch_size)
    # Gumbel MuZero reanalyses without noise: its policy target needs none (`reanalyse.root_noise` is pUCT's).
    alpha = config.search.root_dirichlet_alpha if config.search.algorithm == "puct" else None
    symmetries = spec.symmetries if config.search.random_symmetry else ()
    return LocalReanalyse(config.reanalyse, searcher, config.run.seed, alpha, symmetries)


def make_target_network(config: MuZeroConfig, spec: EnvironmentSpec) -> TargetNetwork:
    """Reanalyse's target network θ⁻, refreshed every `reanalyse.target_network_interval` steps."""
    return TargetNetwork(config.reanalyse.target_network_interval, network_factory(config, spec))


def make_checkpointer(config: MuZeroConfig, run_dir: Path, network: KerasNetwork, learner: Learner) -> Checkpointer:
    """Checkpoints of `network` and the learner's optimizer in RUN_DIR/checkpoints (`run` section)."""
    from muzero.checkpoints import Checkpointer

    return Checkpointer(
        run_dir / CHECKPOINT_DIR,
        network,
        learner.optimizer,
        config.run.max_checkpoints,
        config.run.keep_checkpoint_every_steps,
    )


def build_run(
    config: MuZeroConfig,
    run_dir: Path,
    spec: EnvironmentSpec,
    backend: str = "local",
    ray_address: str | None = None,
) -> RunParts:
    """Makes a fresh run's parts in `run_dir` (created if missing, locked for this process).

    Args:
      config: validated configuration.
      run_dir: the run folder; this process becomes its owner (`muzero.run_dir.lock_run_dir`).
      spec: what the game is (`muzero.envs.check_environment`).
      backend: "local" (self-play in this process) or "ray" (self-play actors, `muzero.actors`).
      ray_address: with "ray": the cluster to join; None starts a local one.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    lock_run_dir(run_dir)
    if backend == "ray":
        config = with_actor_count(config, ray_address)
    seed = config.run.seed
    # Ray first, so that a cluster that cannot be joined stops the run before it starts.
    source = make_selfplay_source(config, spec, backend, ray_address, seed) if backend == "ray" else None
    logging.info("learner devices: %s", ", ".join(configure_devices()))
    seed_everything(seed)
    state = RunState(seed)
    # The learner's network before any other (a compiled searcher's Keras copy draws initial
    # weights too): the same seed gives the same network.
    network = make_run_network(config, spec)
    learner = make_learner(config, network)
    source = source or make_selfplay_source(config, spec, backend, ray_address, seed)
    replay_buffer = make_replay_buffer(config, spec, state.rng)
    target_network = reanalyser = None
    if reanalyse_enabled(config.reanalyse):
        target_network = make_target_network(config, spec)
        target_network.maybe_refresh(0, network)
        replay_buffer.bootstrap_value_fn = target_network.values
        reanalyser = make_reanalyser(config, spec, backend, ray_address)
    return RunParts(
        spec=spec,
        state=state,
        network=network,
        learner=learner,
        storage=SharedStorage(config.action_space_size),
        replay_buffer=replay_buffer,
        source=source,
        target_network=target_network,
        reanalyser=reanalyser,
        checkpointer=make_checkpointer(config, run_dir, network, learner),
        evaluator=Evaluator(
            config.run,
            config.game,
            run_dir,
            functools.partial(make_greedy_player, with_eval_simulations(config), spec),
            None,
            seed,
        ),
        journal=GameJournal(run_dir / JOURNAL_DIR, config.run.max_checkpoints),
        backend=backend,
    )


def resume_run(parts: RunParts, run_dir: Path, step: int | None = None) -> int:
    """Restores the newest complete checkpoint that loads (or the one at `step`) into `parts`,
    sets aside the checkpoints after it, and cuts eval.csv and TensorBoard back to it.

    Returns:
      The training step resumed at.
    """
    from muzero.summaries import Summaries

    checkpointer = parts.checkpointer
    chosen = step is not None
    step, state = checkpointer.restore(step)
    parts.learner.forget_step()
    set_aside = checkpointer.set_aside_after(step)
    if set_aside is not None:
        logging.warning(
            "the checkpoints after training step %d are set aside in %s (move them back into %s to resume from them)",
            step,
            set_aside,
            checkpointer.directory,
        )
    parts.load_state_dict(state)
    _replay_journal(parts, dropped=chosen)
    logging.info(
        "resumed from %s at training step %d (%d games, %d moves)",
        checkpointer.directory / f"ckpt-{step}",
        step,
        parts.replay_buffer.episodes_saved,
        parts.state.counters["env_steps"],
    )
    parts.evaluator.truncate_after(step)
    Summaries.truncate_after(str(run_dir), step, parts.state.counters["env_steps"])
    return step


def _replay_journal(parts: RunParts, dropped: bool) -> None:
    """After a checkpoint is restored: the journal's games that finished after it go to replay
    (the concurrent loop killed between checkpoints), or, for a resume at an older checkpoint
    on purpose (`dropped`: --step), are deleted with the checkpoints set aside."""
    replay, journal = parts.replay_buffer, parts.journal
    if dropped:
        journal.drop_after(replay.games_saved)
        return
    entries = journal.games_after(replay.games_saved)
    for game, training_step in entries:
        replay.save_game(game, training_step)
        parts.state.counters["env_steps"] += game.positions()  # a segment's own moves, not its following ones
        parts.state.counters["stored_moves"] += game.positions()
    if entries:
        logging.info(
            "%d games that finished after the checkpoint (%d moves) added to replay from %s",
            len(entries),
            sum(game.positions() for game, _ in entries),
            journal.directory,
        )


def loop_settings(config: MuZeroConfig) -> LoopSettings:
    """What the loop itself reads from the config."""
    selfplay = config.selfplay
    compiles_search = selfplay.batched and selfplay.search == "compiled"
    return LoopSettings(
        train=config.train,
        run=config.run,
        min_games=config.replay.min_games,
        search_compile_note=(", XLA" if selfplay.jit_compile else "") if compiles_search else None,
    )


def build_trainer(
    config: MuZeroConfig,
    run_dir: Path,
    spec: EnvironmentSpec,
    resume: bool = False,
    batch_hook: Callable[[Batch], Batch] | None = None,
    backend: str = "local",
    ray_address: str | None = None,
    resume_step: int | None = None,
) -> Trainer:
    """One training run in `run_dir`, fresh or resumed from its newest complete checkpoint.

    Args:
      config, run_dir, spec, backend, ray_address: as `build_run`.
      resume: restore the newest complete checkpoint of `run_dir` that loads; the ones after
        it are set aside (`Checkpointer.set_aside_after`).
      batch_hook: tests only: transforms each sampled batch (fault injection).
      resume_step: with `resume`: restore the complete checkpoint at this training step instead.
    """
    from muzero.summaries import flatten_config
    from muzero.telemetry import Telemetry

    parts = build_run(config, run_dir, spec, backend, ray_address)
    last_saved_step = resume_run(parts, run_dir, resume_step) if resume else -1
    config_text = config_to_yaml(config)
    write_atomically(run_dir / CONFIG_FILE, config_text)
    telemetry = Telemetry(str(run_dir), config.train.training_steps, image_game=len(spec.observation_shape) == 3)
    parts.evaluator.summaries = telemetry.summaries
    if not resume:
        telemetry.start(config_text, flatten_config(config_to_dict(config)), trial_id=run_dir.name)
        parts.evaluator.start_file()
    return Trainer(parts, loop_settings(config), telemetry, last_saved_step, batch_hook)


def train(
    config: MuZeroConfig,
    run_dir: Path,
    spec: EnvironmentSpec,
    resume: bool = False,
    backend: str = "local",
    ray_address: str | None = None,
    resume_step: int | None = None,
) -> dict:
    """Runs (or resumes) training in `run_dir`; returns the final figures (`Trainer.run`)."""
    return build_trainer(
        config, run_dir, spec, resume=resume, backend=backend, ray_address=ray_address, resume_step=resume_step
    ).run()
