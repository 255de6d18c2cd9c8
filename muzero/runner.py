"""The training run: the pseudocode's `muzero()` loop, resumable, with greedy evaluation.

The pseudocode runs actors (`run_selfplay`) and the learner (`train_network`)
concurrently, talking through `SharedStorage` (networks) and `ReplayBuffer` (games).
Here the loop alternates: train until the training steps reach `train.steps_per_move`
times the moves played so far, then collect self-play from the self-play source
(`LocalSelfPlay` in this process, or `RaySelfPlay`'s actors) with the newest published
network; publish and checkpoint every `train.checkpoint_interval` steps, evaluate every
`run.eval_interval`.

`Trainer.__init__` wires the parts (the builder); `Trainer.run` is the loop. Everything
the loop depends on (weights, optimizer, replay, RNG states, counters, environments and
games in progress) is in each checkpoint, so a resumed run continues exactly.
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from absl import logging

from muzero.config import MuZeroConfig
from muzero.config_io import config_to_dict, config_to_yaml
from muzero.envs import EnvironmentSpec, make_environments
from muzero.evaluation import Evaluator
from muzero.progress import ProgressReporter, RecentRate
from muzero.reanalyse import LocalReanalyse, TargetNetwork, reanalyse_enabled
from muzero.replay import Batch, ReplayBuffer
from muzero.run_dir import CHECKPOINT_DIR, CONFIG_FILE, lock_run_dir, write_atomically
from muzero.run_state import RunState, seed_everything
from muzero.search import make_searcher
from muzero.selfplay import LocalSelfPlay, SelfPlaySource, SelfPlayStopped
from muzero.storage import SharedStorage

# Training-step summaries every this many steps (and at the run's last step).
SUMMARY_EVERY = 10
# Batch-building time, priorities, value histograms: every this many steps (and at the last).
SLOW_SUMMARY_EVERY = 100
# Positions of the batch whose predicted values and targets go into the histograms.
HISTOGRAM_POSITIONS = 256
# Image games: a few observation frames of a self-play game every this many training steps.
IMAGE_EVERY = 1000


class RunStopped(RuntimeError):
    """The run stopped on purpose (non-finite values, no self-play left); one line for the user."""


def configure_devices() -> list[str]:
    """Uses a GPU when TensorFlow sees one (its default), growing its memory as needed
    instead of reserving it all, so evaluation and other processes can share it.
    Returns the devices the learner can use, e.g. ["GPU:0"] or ["CPU:0"]."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:  # already initialised in this process
            pass
    return [f"GPU:{i}" for i in range(len(gpus))] or ["CPU:0"]


def make_reanalyser(config: MuZeroConfig, spec: EnvironmentSpec, backend: str, ray_address: str | None):
    """Reanalyse on actors ("ray" with `reanalyse.num_actors` > 0: `RayReanalyse`), or in this
    process between training steps (`LocalReanalyse`)."""
    if backend == "ray" and config.reanalyse.num_actors > 0:
        from muzero.reanalyse_actors import RayReanalyse

        return RayReanalyse(config, spec, ray_address)
    searcher = make_searcher(
        config, config.reanalyse.batch_size, spec.observation_shape, spec.observation_dtype, spec.num_players
    )
    return LocalReanalyse(config, searcher)


def make_selfplay_source(
    config: MuZeroConfig, spec: EnvironmentSpec, backend: str, ray_address: str | None, seed: int
) -> SelfPlaySource:
    """Self-play in this process ("local") or on Ray actors ("ray": `muzero.actors`)."""
    if backend == "ray":
        from muzero.actors import RaySelfPlay

        return RaySelfPlay(config, spec, ray_address)
    batched = config.selfplay.batched
    environments = make_environments(config.game, config.selfplay.num_envs if batched else 1, seed)
    searcher = (
        make_searcher(
            config, config.selfplay.num_envs, spec.observation_shape, spec.observation_dtype, spec.num_players
        )
        if batched
        else None
    )
    return LocalSelfPlay(config, environments, searcher)


class Trainer:
    """One training run in `run_dir`, fresh or resumed from its newest complete checkpoint.

    Args:
      config: validated configuration.
      run_dir: writable (created if missing); this process becomes its owner
        (`muzero.run_dir.lock_run_dir`) if it is not already.
      spec: what the game is (`muzero.envs.check_environment`).
      resume: restore the newest complete checkpoint of `run_dir` that loads; the ones after
        it are set aside (`Checkpointer.set_aside_after`).
      resume_step: with `resume`: restore the complete checkpoint at this training step instead.
      batch_hook: tests only: transforms each sampled batch (fault injection).
      backend: "local" (self-play in this process) or "ray" (self-play actors, `muzero.actors`).
      ray_address: with "ray": the cluster to join; None starts a local one.
    """

    def __init__(
        self,
        config: MuZeroConfig,
        run_dir: Path,
        spec: EnvironmentSpec,
        resume: bool = False,
        batch_hook: Callable[[Batch], Batch] | None = None,
        backend: str = "local",
        ray_address: str | None = None,
        resume_step: int | None = None,
    ):
        from muzero.checkpoints import Checkpointer
        from muzero.networks import make_network
        from muzero.summaries import ReplayFootprint, Summaries, flatten_config
        from muzero.training import Learner

        self.config, self.run_dir, self.batch_hook = config, run_dir, batch_hook
        run_dir.mkdir(parents=True, exist_ok=True)
        lock_run_dir(run_dir)
        seed = config.run.seed
        # Ray first, so that a cluster that cannot be joined stops the run before it starts.
        source = make_selfplay_source(config, spec, backend, ray_address, seed) if backend == "ray" else None
        logging.info("learner devices: %s", ", ".join(configure_devices()))
        seed_everything(seed)
        self.state = RunState(seed)
        # The learner's network before any other (a compiled searcher's Keras copy draws
        # initial weights too): the same seed gives the same network.
        self.network = make_network(config, spec.observation_shape, spec.observation_dtype)
        self.learner = Learner(config, self.network)
        self.source = source or make_selfplay_source(config, spec, backend, ray_address, seed)
        self.storage = SharedStorage(config.action_space_size)
        self.replay_buffer = ReplayBuffer(config, self.state.rng, spec.symmetries)
        self.target_network = self.reanalyser = None
        if reanalyse_enabled(config):
            self.target_network = TargetNetwork(config, spec.observation_shape, spec.observation_dtype)
            self.target_network.maybe_refresh(0, self.network)
            self.replay_buffer.bootstrap_value_fn = self.target_network.values
            self.reanalyser = make_reanalyser(config, spec, backend, ray_address)
        self.checkpointer = Checkpointer(
            run_dir / CHECKPOINT_DIR,
            self.network,
            self.learner.optimizer,
            config.run.max_checkpoints,
            config.run.keep_checkpoint_every_steps,
        )
        self.summaries = None
        self.evaluator = Evaluator(config, run_dir, spec, None, seed)
        self.last_saved_step = -1
        if resume:
            step, state = self.checkpointer.restore(resume_step)
            set_aside = self.checkpointer.set_aside_after(step)
            if set_aside is not None:
                logging.warning(
                    "the checkpoints after training step %d are set aside in %s (move them back into "
                    "%s to resume from them)",
                    step,
                    set_aside,
                    self.checkpointer.directory,
                )
            self._load_state(state)
            self.last_saved_step = step
            logging.info(
                "resumed from %s at training step %d (%d games, %d moves)",
                self.checkpointer.directory / f"ckpt-{step}",
                step,
                self.replay_buffer.games_saved,
                self.state.counters["env_steps"],
            )
            self.evaluator.truncate_after(step)
            Summaries.truncate_after(str(run_dir), step, self.state.counters["env_steps"])
        self.summaries = self.evaluator.summaries = Summaries(str(run_dir))
        config_text = config_to_yaml(config)
        write_atomically(run_dir / CONFIG_FILE, config_text)
        if not resume:
            self.summaries.text("config", "```\n" + config_text + "\n```")
            self.summaries.hparams(flatten_config(config_to_dict(config)), trial_id=run_dir.name)
            self.evaluator.start_file()
        self.image_game = len(spec.observation_shape) == 3
        self.last_image_step: int | None = None
        self.replay_footprint = ReplayFootprint()
        self.move_rate = RecentRate()  # self-play moves against seconds spent in self-play
        self.histogram_batch: tuple[Batch, np.ndarray] | None = None
        self.selfplay_calls = 0
        self.storage.save_network(self.learner.training_step, self.network)
        self.stop_signal: str | None = None
        self.consecutive_nonfinite = 0
        self.last_metrics: dict[str, float] = {}
        self.times = {
            "batch": 0.0,
            "step": 0.0,
            "selfplay": 0.0,
            "selfplay_moves": 0,
            "learner": 0.0,
            "learner_steps": 0,
        }
        self.batch_fraction = float("nan")

    # ----- state that makes a resume exact -----

    def _state(self) -> dict:
        environments, games = self.source.state()
        state = self.state.state_dict(
            self.evaluator.rng, (environments, self.evaluator.environments), games, self.replay_buffer.state_dict()
        )
        if self.reanalyser is not None:
            state["reanalyse"] = {
                "target_network": self.target_network.state_dict(),
                "worker": self.reanalyser.state_dict(),
            }
        return state

    def _load_state(self, state: dict) -> None:
        self.state.load_state_dict(state, self.evaluator.rng)
        environments, self.evaluator.environments = state["environments"]
        self.source.load_state(environments, state["games_in_progress"])
        self.replay_buffer.load_state_dict(state["replay"])
        self.network.steps = self.learner.training_step
        if self.reanalyser is not None and "reanalyse" in state:
            self.target_network.load_state_dict(state["reanalyse"]["target_network"])
            self.reanalyser.load_state_dict(state["reanalyse"]["worker"])
        elif self.reanalyser is not None:  # a checkpoint from before Reanalyse was turned on
            self.target_network.maybe_refresh(self.learner.training_step, self.network)

    def publish(self) -> None:
        """Publishes the network to self-play and writes a checkpoint (pseudocode: save_network)."""
        self.state.counters["wall_seconds"] = time.time() - self.started
        self.storage.save_network(self.learner.training_step, self.network)
        step = self.learner.training_step
        if step != self.last_saved_step:
            from muzero.checkpoints import CheckpointWriteError

            try:
                self.checkpointer.save(step, self._state())
            except CheckpointWriteError as error:  # disk full: the run cannot go on, nothing is lost
                raise RunStopped(str(error)) from None
            self.last_saved_step = step

    # ----- the loop -----

    # The pseudocode's muzero(): self-play and training alternate, the network is
    # published (and checkpointed) every checkpoint_interval steps.
    def run(self) -> dict:
        """Trains until `train.training_steps` or a stop signal; returns the final figures."""
        counters = self.state.counters
        self.started = time.time() - counters["wall_seconds"]
        self.progress = ProgressReporter(
            self.config.train.training_steps,
            self.config.run.log_every_seconds,
            self.learner.training_step,
            counters["env_steps"],
            self.started,
        )
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            while not self._done():
                self.train_to_ratio()
                if self._done():
                    break
                self.self_play()
                self.progress.maybe_print(
                    self.learner.training_step,
                    self.replay_buffer.games_saved,
                    counters["env_steps"],
                    self.last_metrics,
                    self.batch_fraction,
                    self.source.progress(),
                )
            # Final checkpoint; a second Ctrl-C while it is written is ignored.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            self.publish()
            if self.stop_signal is None and self.evaluator.last_step != self.learner.training_step:
                self._evaluate()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.summaries.close()
            if self.reanalyser is not None:
                self.reanalyser.close()
            self.source.close()
        return self._result()

    def _done(self) -> bool:
        return self.learner.training_step >= self.config.train.training_steps or self.stop_signal is not None

    def _on_signal(self, signum: int, frame) -> None:
        self.stop_signal = signal.Signals(signum).name
        logging.warning("%s received: stopping after the current step with a final checkpoint", self.stop_signal)

    def train_to_ratio(self) -> None:
        """Learner: train while behind `steps_per_move` training steps per self-play move."""
        from muzero.training import train_on_replay

        config = self.config
        if len(self.replay_buffer) < config.replay.min_games:
            return
        target = min(int(self.state.counters["env_steps"] * config.train.steps_per_move), config.train.training_steps)
        started, steps_before = time.time(), self.learner.training_step
        while self.learner.training_step < target and self.stop_signal is None:
            if self.learner.tracing_count() == 0:
                self.progress.note(
                    "compiling the training step (the first step traces it%s)",
                    " and compiles it with XLA" if config.train.jit_compile else "",
                )
            result = train_on_replay(self.learner, self.replay_buffer, self._keep_batch)
            self.times["batch"] += result.batch_seconds
            self.times["step"] += result.step_seconds
            if not result.finite:
                self._on_nonfinite(result.metrics)
                continue
            self.consecutive_nonfinite = 0
            self.last_metrics = result.metrics
            step = self.learner.training_step
            if self.reanalyser is not None:
                self.target_network.maybe_refresh(step, self.network)
                self.reanalyser.after_training_step(self.replay_buffer, self.storage.latest_network(), step)
            # Not at the end of every burst: with a few steps per self-play call that wrote the
            # step's summaries nearly every step (~8 ms each, 10% of a MinAtar step).
            self._step_summaries(
                step, result.metrics, last=step == config.train.training_steps or self.stop_signal is not None
            )
            if step % config.train.checkpoint_interval == 0:
                self.publish()
            if config.run.eval_interval and step % config.run.eval_interval == 0:
                self._evaluate()
        # The learner's own speed (bursts of training, not the self-play between them), written
        # once SUMMARY_EVERY steps have gathered rather than after every burst.
        self.times["learner"] += time.time() - started
        self.times["learner_steps"] += self.learner.training_step - steps_before
        if self.times["learner_steps"] >= SUMMARY_EVERY:
            self.summaries.scalars(
                self.learner.training_step,
                {"train/steps_per_sec": self.times["learner_steps"] / max(self.times["learner"], 1e-9)},
            )
            self.times["learner"], self.times["learner_steps"] = 0.0, 0

    def _keep_batch(self, batch: Batch) -> Batch:
        """The batch hook of every step: keeps a copy of the first rows of the batch of a step
        that writes value histograms (`_value_histograms`), after the tests' `batch_hook`."""
        if self.batch_hook is not None:
            batch = self.batch_hook(batch)
        if self._histogram_step(self.learner.training_step + 1):
            rows = slice(0, HISTOGRAM_POSITIONS)
            self.histogram_batch = (
                batch.take(rows),  # every field cut alike; copies, so the sampled arrays are not kept
                np.array(batch.target_value[rows, 0], np.float32),
            )
        return batch

    def _histogram_step(self, step: int) -> bool:
        return step % SLOW_SUMMARY_EVERY == 0 or step == self.config.train.training_steps

    def self_play(self) -> None:
        """Self-play: the source's finished games go to replay, with their figures."""
        if (
            self.selfplay_calls == 0
            and not self.source.concurrent
            and self.config.selfplay.batched
            and self.config.selfplay.search == "compiled"
        ):
            self.progress.note(
                "compiling the self-play search (first move%s)", ", XLA" if self.config.selfplay.jit_compile else ""
            )
        self.selfplay_calls += 1
        from muzero.summaries import observation_frames, visit_entropy

        # Moves per second of self-play: of the time spent playing here, or of all the time
        # since the last collection for actors that play while the learner trains.
        started = self.times.get("last_play_end", time.time()) if self.source.concurrent else time.time()
        try:
            games, moves = self.source.play(
                self.storage, self.state.rng, lambda: self.stop_signal is not None, self.learner.training_step
            )
        except SelfPlayStopped as error:
            self.publish()
            final = self.checkpointer.directory / f"ckpt-{self.last_saved_step}"
            raise RunStopped(f"{error}; final checkpoint {final}") from None
        self.times["last_play_end"] = time.time()
        self.times["selfplay"] += self.times["last_play_end"] - started
        self.times["selfplay_moves"] += moves
        self.state.counters["env_steps"] += moves
        step, env_steps = self.learner.training_step, self.state.counters["env_steps"]
        self.move_rate.add(self.times["selfplay"], self.times["selfplay_moves"])
        for game in games:
            self.replay_buffer.save_game(game, step)
            self.progress.add_return(game.episode_return())
            self.summaries.scalars(
                step,
                {
                    "selfplay/episode_return": game.episode_return(),
                    "selfplay/episode_length": len(game),
                    "mcts/root_value": float(np.mean(game.root_values)),
                    "mcts/root_visit_entropy": visit_entropy(game.child_visits),
                },
            )
            # The same returns against environment steps (the moves played up to this collection).
            self.summaries.scalars(env_steps, {"selfplay/episode_return_by_env_step": game.episode_return()})
        if games:
            positions, nbytes = self.replay_footprint.measure(self.replay_buffer.buffer)
            moves_per_sec = self.move_rate.rate()
            self.summaries.scalars(
                step,
                {
                    **({"selfplay/moves_per_sec": moves_per_sec} if math.isfinite(moves_per_sec) else {}),
                    "selfplay/env_steps": env_steps,
                    "replay/games": len(self.replay_buffer),
                    "replay/games_saved": self.replay_buffer.games_saved,
                    "replay/positions": positions,
                    "replay/bytes": nbytes,
                },
            )
            if self.image_game and (self.last_image_step is None or step - self.last_image_step >= IMAGE_EVERY):
                frames = observation_frames(games[0].observations)
                if frames is not None:
                    self.summaries.images(step, "selfplay/observations", frames)
                    self.last_image_step = step
        self.summaries.scalars(step, self.source.metrics())

    def _step_summaries(self, step: int, metrics: dict, last: bool) -> None:
        if step % SUMMARY_EVERY == 0 or last or any(name.startswith("grad/") for name in metrics):
            self.summaries.scalars(step, {**metrics, "train/lr": float(self.learner.optimizer.learning_rate)})
        if step % SLOW_SUMMARY_EVERY == 0:
            # Building a batch from replay, as a fraction of the training step it feeds.
            self.batch_fraction = self.times["batch"] / max(self.times["step"], 1e-9)
            self.times["batch"] = self.times["step"] = 0.0
            self.summaries.scalars(
                step,
                {
                    "train/batch_fraction": self.batch_fraction,
                    "replay/priority_mean": self.replay_buffer.priority_mean(),
                },
            )
            if self.reanalyser is not None:
                self.summaries.scalars(step, self.reanalyser.metrics(self.replay_buffer))
        if self._histogram_step(step) and self.histogram_batch is not None:
            self._value_histograms(step)

    def _value_histograms(self, step: int) -> None:
        """The network's values at k = 0 against their n-step targets, on the first rows of this
        step's batch (after the update): `values/predicted`, `values/target`, `values/error`."""
        batch, target = self.histogram_batch
        self.histogram_batch = None
        observation = self.learner.prepare(batch._replace(importance_weight=None)).observation
        predicted = np.asarray(self.network.initial_inference(observation).value, np.float32).reshape(-1)
        self.summaries.histograms(
            step, {"values/predicted": predicted, "values/target": target, "values/error": predicted - target}
        )

    def _on_nonfinite(self, metrics: dict) -> None:
        """A skipped update: count it, and stop when the policy or the bound says so."""
        step, train_cfg = self.learner.training_step, self.config.train
        self.state.counters["nonfinite_skips"] += 1
        self.consecutive_nonfinite += 1
        self.summaries.scalars(step, {"train/nonfinite_skips": self.state.counters["nonfinite_skips"]})
        last_good = (
            self.checkpointer.directory / f"ckpt-{self.last_saved_step}" if self.last_saved_step >= 0 else "none yet"
        )
        if train_cfg.nonfinite == "stop":
            raise RunStopped(
                f"non-finite loss or gradient at training step {step + 1} "
                f"(loss/total={metrics.get('loss/total')}); last good checkpoint: {last_good}"
            )
        logging.warning(
            "non-finite loss or gradient at training step %d: update skipped (%d in a row)",
            step + 1,
            self.consecutive_nonfinite,
        )
        if self.consecutive_nonfinite >= train_cfg.max_consecutive_nonfinite:
            raise RunStopped(
                f"{self.consecutive_nonfinite} consecutive non-finite updates up to training step "
                f"{step + 1} (train.max_consecutive_nonfinite); last good checkpoint: {last_good}"
            )

    def _evaluate(self) -> None:
        self.progress.note(
            "evaluating: %d greedy episodes at training step %d",
            self.config.run.eval_episodes,
            self.learner.training_step,
        )
        self.evaluator.evaluate(
            self.learner.training_step,
            self.storage.latest_network(),
            self.state.counters,
            self.replay_buffer.games_saved,
            time.time() - self.started,
        )

    def _result(self) -> dict:
        evaluation = self.evaluator.last
        counters = self.state.counters
        result = {
            "training_step": self.learner.training_step,
            "games": self.replay_buffer.games_saved,
            "env_steps": counters["env_steps"],
            "wall_seconds": time.time() - self.started,
            "mean_return": float(evaluation.mean()) if evaluation is not None else float("nan"),
            "std_return": float(evaluation.std()) if evaluation is not None else float("nan"),
            "stopped_by": self.stop_signal,
            "nonfinite_skips": counters["nonfinite_skips"],
        }
        return {**result, **self.source.result()}


def train(
    config: MuZeroConfig,
    run_dir: Path,
    spec: EnvironmentSpec,
    resume: bool = False,
    backend: str = "local",
    ray_address: str | None = None,
    resume_step: int | None = None,
) -> dict:
    """Runs (or resumes) training in `run_dir`; see `Trainer`."""
    return Trainer(
        config, run_dir, spec, resume=resume, backend=backend, ray_address=ray_address, resume_step=resume_step
    ).run()
