"""The training run: self-play and learner in one process, resumable, with greedy evaluation.

The pseudocode runs actors (`run_selfplay`) and the learner (`train_network`)
concurrently, talking through `SharedStorage` (networks) and `ReplayBuffer`
(games). Here they alternate in one process: train until the number of training
steps reaches `train.steps_per_move` times the moves played so far, then play with
the newest published network: one whole game (the reference `play_game`), or with
`selfplay.batched` one move in each of `num_envs` games in progress. Finished games
go to replay. The pieces exchange only plain data (games, numpy weights), so they can
later run apart.

Everything the loop depends on (weights, optimizer, replay buffer, RNG states,
counters) is in each checkpoint, so a resumed run continues exactly where the
checkpoint was taken. Evaluation uses its own RNG and environment: it never
changes the training trajectory.

Two self-play back ends: `local` (the above, in one process) and `ray`, where
`muzero.actors` plays on Ray actors while the learner trains here; the loop is the
same, `_self_play` then hands out work and collects whole games from the actors.
"""

from __future__ import annotations

import csv
import io
import random
import signal
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import numpy as np
from absl import logging

from muzero.config import MuZeroConfig
from muzero.config_io import config_to_yaml
from muzero.environment import Environment, make_environment
from muzero.network import Network
from muzero.replay import Batch, ReplayBuffer
from muzero.run_dir import CHECKPOINT_DIR, CONFIG_FILE, EVAL_FILE, write_atomically
from muzero.selfplay import BatchedSelfPlay, play_game, play_games_batched
from muzero.storage import SharedStorage

EVAL_COLUMNS = ["training_step", "env_steps", "games", "wall_seconds", "eval_seconds", "mean_return", "std_return"]
STATE_VERSION = 1


class RunStopped(RuntimeError):
    """The run stopped on purpose (non-finite values); the message is one line for the user."""


def seed_everything(seed: int) -> None:
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(seed)  # Python, numpy and TensorFlow global seeds.
    # tf.random.Generator's global instance is not covered by set_seed; it is checkpointed.
    tf.random.set_global_generator(tf.random.Generator.from_seed(seed))


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


def evaluate_network(config: MuZeroConfig, network: Network, environments: list[Environment], episodes: int,
                     rng: np.random.Generator, searcher=None) -> np.ndarray:
    """Returns of `episodes` greedy games (no exploration noise, temperature 0).

    With `selfplay.batched`, the games run side by side, one per environment (len(environments)
    must then be `episodes`); otherwise one after the other in environments[0].
    """
    if config.selfplay.batched:
        games = play_games_batched(config, lambda: network, environments[:episodes], rng, greedy=True,
                                   searcher=searcher)
    else:
        games = [play_game(config, network, environments[0], rng, greedy=True) for _ in range(episodes)]
    return np.array([game.episode_return() for game in games])


def make_environments(config: MuZeroConfig, count: int, seed: int) -> list[Environment]:
    """`count` environments with distinct, reproducible seeds."""
    return [make_environment(config, seed * 10_007 + i) for i in range(count)]


class Trainer:
    """One training run in `run_dir`, fresh or resumed from its newest complete checkpoint.

    Args:
      config: validated configuration.
      run_dir: created and writable.
      observation_shape: the environment's observation shape.
      resume: restore the newest complete checkpoint of `run_dir`.
      batch_hook: tests only: transforms each sampled batch (fault injection).
      backend: "local" (self-play in this process) or "ray" (self-play actors, `muzero.actors`).
      ray_address: with "ray": the cluster to join; None starts a local one.
    """

    def __init__(self, config: MuZeroConfig, run_dir: Path, observation_shape: tuple[int, ...], resume: bool = False,
                 batch_hook: Callable[[Batch], Batch] | None = None, backend: str = "local",
                 ray_address: str | None = None):
        from muzero.checkpoints import Checkpointer
        from muzero.models import make_network
        from muzero.summaries import Summaries
        from muzero.training import Learner

        self.config = config
        self.run_dir = run_dir
        self.batch_hook = batch_hook
        self.actors = None
        if backend == "ray":  # first, so that a cluster that cannot be joined stops the run before it starts
            from muzero.actors import SelfPlayActors

            self.actors = SelfPlayActors(config, observation_shape, ray_address)
        seed = config.run.seed
        logging.info("learner devices: %s", ", ".join(configure_devices()))
        seed_everything(seed)
        self.rng = np.random.default_rng(seed)
        self.eval_rng = np.random.default_rng([seed, 1])
        batched = config.selfplay.batched
        # Self-play environments and searcher here only for the local back end (the actors hold their own).
        local_selfplay = self.actors is None
        self.environments = make_environments(config, (config.selfplay.num_envs if batched else 1)
                                              if local_selfplay else 0, seed)
        self.eval_environments = make_environments(config, config.run.eval_episodes if batched else 1, seed + 1)
        self.network = make_network(config, observation_shape)
        self.learner = Learner(config, self.network)
        self.storage = SharedStorage(config.action_space_size)
        self.replay_buffer = ReplayBuffer(config, self.rng)
        self.searcher = self.eval_searcher = None
        if batched and config.selfplay.search == "compiled":
            from muzero.selfplay import CompiledSelfPlaySearch

            if local_selfplay:
                self.searcher = CompiledSelfPlaySearch(config, observation_shape, config.selfplay.num_envs)
            self.eval_searcher = CompiledSelfPlaySearch(config, observation_shape, config.run.eval_episodes)
        self.selfplay = BatchedSelfPlay(config, self.environments, self.searcher) if batched and local_selfplay \
            else None
        self.actor_network: Network | None = None
        self.selfplay_moves, self.selfplay_seconds, self.selfplay_steps = 0, 0.0, 0
        self.checkpointer = Checkpointer(run_dir / CHECKPOINT_DIR, self.network, self.learner.optimizer,
                                         config.run.max_checkpoints)
        self.counters = {"env_steps": 0, "wall_seconds": 0.0, "eval_seconds": 0.0, "nonfinite_skips": 0}
        self.consecutive_nonfinite = 0
        self.stop_signal: str | None = None
        self.last_saved_step = -1

        if resume:
            step, state = self.checkpointer.restore()
            self._load_state(state)
            self.last_saved_step = step
            logging.info("resumed from %s at training step %d (%d games, %d moves)",
                         self.checkpointer.directory / f"ckpt-{step}", step, self.replay_buffer.games_saved,
                         self.counters["env_steps"])
            _truncate_eval_csv(run_dir / EVAL_FILE, step)
            Summaries.truncate_after(str(run_dir), step)
        self.summaries = Summaries(str(run_dir))
        config_text = config_to_yaml(config)
        write_atomically(run_dir / CONFIG_FILE, config_text)
        if not resume:
            self.summaries.text("config", "```\n" + config_text + "\n```")
            with open(run_dir / EVAL_FILE, "w", newline="") as f:
                csv.writer(f).writerow(EVAL_COLUMNS)
        self.storage.save_network(self.learner.training_step, self.network)
        self.returns: deque[float] = deque(maxlen=20)
        self.last_metrics: dict[str, float] = {}
        self.last_eval: np.ndarray | None = None
        self.last_eval_step = -1
        self.batch_seconds = self.step_seconds = 0.0
        self.batch_fraction = float("nan")

    # ----- state that makes a resume exact -----

    def _state(self) -> dict:
        return {
            "version": STATE_VERSION,
            "rng": self.rng.bit_generator.state,
            "eval_rng": self.eval_rng.bit_generator.state,
            "python_random": random.getstate(),
            "numpy_global": np.random.get_state(),
            # Environments are pickled whole (gymnasium's CartPole pickles with its state), with
            # the games in progress that hold them, so a resumed run continues those games.
            "environments": (self.environments, self.eval_environments),
            "games_in_progress": self.selfplay.games if self.selfplay else [],
            "replay": self.replay_buffer.state_dict(),
            "counters": dict(self.counters),
        }

    def _load_state(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.eval_rng.bit_generator.state = state["eval_rng"]
        random.setstate(state["python_random"])
        np.random.set_state(state["numpy_global"])
        environments, self.eval_environments = state["environments"]
        # The games in progress continue where they were, unless the actors play (they start
        # fresh games) or the checkpoint has none for these environments (written by the Ray back end).
        if self.actors is None and len(environments) == len(self.environments):
            self.environments = environments
            if self.selfplay is not None:
                self.selfplay.environments = self.environments
                self.selfplay.games = state["games_in_progress"]
        self.replay_buffer.load_state_dict(state["replay"])
        self.counters.update(state["counters"])
        self.network.steps = self.learner.training_step

    def save_checkpoint(self) -> None:
        step = self.learner.training_step
        if step == self.last_saved_step:
            return
        self.checkpointer.save(step, self._state())
        self.last_saved_step = step

    # ----- the loop -----

    def run(self) -> dict:
        """Trains until `train.training_steps` or a stop signal; returns the final figures."""
        train_cfg = self.config.train
        self.started = time.time() - self.counters["wall_seconds"]
        self.last_print, self.steps_at_print, self.moves_at_print = time.time(), self.learner.training_step, \
            self.counters["env_steps"]
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            while self.learner.training_step < train_cfg.training_steps and self.stop_signal is None:
                self._train_to_ratio()
                if self.learner.training_step >= train_cfg.training_steps or self.stop_signal is not None:
                    break
                self._self_play()
                self._maybe_print_progress()
            # Final checkpoint; a second Ctrl-C while it is written is ignored.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            self.counters["wall_seconds"] = time.time() - self.started
            self.publish()
            if self.stop_signal is None and self.last_eval_step != self.learner.training_step:
                self._evaluate(self.learner.training_step)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.summaries.close()
            if self.actors is not None:
                self.actors.close()
        evaluation = self.last_eval if self.last_eval is not None else np.array([np.nan])
        result = {"training_step": self.learner.training_step, "games": self.replay_buffer.games_saved,
                  "env_steps": self.counters["env_steps"], "mean_return": float(evaluation.mean()),
                  "std_return": float(evaluation.std()), "wall_seconds": time.time() - self.started,
                  "stopped_by": self.stop_signal, "nonfinite_skips": self.counters["nonfinite_skips"]}
        if self.actors is not None:
            result.update(actor_restarts=self.actors.restarts, games_by_actor=self.actors.games_by_actor)
        return result

    def _on_signal(self, signum: int, frame) -> None:
        self.stop_signal = signal.Signals(signum).name
        logging.warning("%s received: stopping after the current step with a final checkpoint", self.stop_signal)

    def publish(self) -> None:
        """Publishes the network to self-play and writes a checkpoint (pseudocode: save_network)."""
        self.storage.save_network(self.learner.training_step, self.network)
        self.save_checkpoint()

    def _train_to_ratio(self) -> None:
        """Learner: train while behind `steps_per_move` training steps per self-play move."""
        config, train_cfg = self.config, self.config.train
        if len(self.replay_buffer) < config.replay.min_games:
            return
        target = min(int(self.counters["env_steps"] * train_cfg.steps_per_move), train_cfg.training_steps)
        started, steps_before = time.time(), self.learner.training_step
        while self.learner.training_step < target and self.stop_signal is None:
            t0 = time.perf_counter()
            batch = self.replay_buffer.sample_batch(train_cfg.num_unroll_steps, train_cfg.td_steps)
            if self.batch_hook is not None:
                batch = self.batch_hook(batch)
            t1 = time.perf_counter()
            metrics = self.learner.train_step(batch)
            initial_value = metrics.pop("initial_value")
            self.batch_seconds += t1 - t0
            self.step_seconds += time.perf_counter() - t1
            if not metrics.pop("train/finite"):
                self._on_nonfinite(metrics)
                continue
            self.replay_buffer.refresh_priorities(batch, initial_value)
            if batch.importance_weight is not None:  # the largest weight shows how uneven sampling is
                metrics["replay/importance_weight_max"] = float(batch.importance_weight.max())
            self.consecutive_nonfinite = 0
            self.last_metrics = metrics
            step = self.learner.training_step
            if step % 10 == 0 or step == target or any(name.startswith("grad/") for name in metrics):
                self.summaries.scalars(step, metrics)
                self.summaries.scalars(step, {"train/lr": float(self.learner.optimizer.learning_rate)})
            if step % 100 == 0:
                # Building a batch from replay, as a fraction of the training step it feeds.
                self.batch_fraction = self.batch_seconds / max(self.step_seconds, 1e-9)
                self.summaries.scalars(step, {"train/batch_fraction": self.batch_fraction})
                self.batch_seconds = self.step_seconds = 0.0
                self.summaries.scalars(step, {"replay/priority_mean": self.replay_buffer.priority_mean()})
            if step % train_cfg.checkpoint_interval == 0:
                self.counters["wall_seconds"] = time.time() - self.started
                self.publish()
            if config.run.eval_interval and step % config.run.eval_interval == 0:
                self._evaluate(step)
        seconds = time.time() - started
        if self.learner.training_step > steps_before:
            self.summaries.scalars(self.learner.training_step, {
                "train/steps_per_sec": (self.learner.training_step - steps_before) / max(seconds, 1e-9)})

    def _on_nonfinite(self, metrics: dict) -> None:
        """A skipped update: count it, and stop when the policy or the bound says so."""
        step = self.learner.training_step
        self.counters["nonfinite_skips"] += 1
        self.consecutive_nonfinite += 1
        self.summaries.scalars(step, {"train/nonfinite_skips": self.counters["nonfinite_skips"]})
        train_cfg = self.config.train
        last_good = (self.checkpointer.directory / f"ckpt-{self.last_saved_step}"
                     if self.last_saved_step >= 0 else "none yet")
        if train_cfg.nonfinite == "stop":
            raise RunStopped(f"non-finite loss or gradient at training step {step + 1} "
                             f"(loss/total={metrics.get('loss/total')}); last good checkpoint: {last_good}")
        logging.warning("non-finite loss or gradient at training step %d: update skipped (%d in a row)",
                        step + 1, self.consecutive_nonfinite)
        if self.consecutive_nonfinite >= train_cfg.max_consecutive_nonfinite:
            raise RunStopped(f"{self.consecutive_nonfinite} consecutive non-finite updates up to training step "
                             f"{step + 1} (train.max_consecutive_nonfinite); last good checkpoint: {last_good}")

    def _self_play(self) -> None:
        """Self-play: one move in each of num_envs games (batched), or one whole game (reference);
        with the Ray back end, whatever the actors finished."""
        if self.actors is not None:
            self._self_play_on_actors()
            return
        started = time.time()
        if self.selfplay is not None:
            # The newest published network, pulled every refresh_interval moves.
            if self.selfplay_steps % self.config.selfplay.refresh_interval == 0:
                self.actor_network = self.storage.latest_network()
            self.selfplay_steps += 1
            moves_before = self.selfplay.moves_in_progress()
            games = [game for _, game in self.selfplay.step(self.actor_network, self.rng)]
            moves = self.selfplay.moves_in_progress() + sum(len(game) for game in games) - moves_before
        else:
            games = [play_game(self.config, self.storage.latest_network(), self.environments[0], self.rng)]
            moves = len(games[0])
        self._save_games(games, moves, time.time() - started)

    def _self_play_on_actors(self) -> None:
        """Ray back end: the learner has caught up; wait for finished calls, put their games
        in replay, and refill the actors' call slots so they play while the learner trains.

        Backpressure: calls are only handed out here, so the actors run at most
        `actors.max_inflight_per_actor` calls ahead of a learner slower than them.
        """
        actors, actors_cfg = self.actors, self.config.actors
        if not actors.actors:
            actors.start(self.learner.training_step, should_stop=lambda: self.stop_signal is not None)
            self.last_collect = time.time()
        actors.publish(self.storage.latest_step(), self.storage.latest_network())
        actors.submit()
        results = actors.collect(should_stop=lambda: self.stop_signal is not None)
        actors.submit()
        now = time.time()
        self._save_games([game for result in results for game in result.games], sum(r.moves for r in results),
                         now - self.last_collect)
        self.last_collect = now
        self.summaries.scalars(self.learner.training_step, {
            "actors/restarts": actors.restarts, "actors/live": actors.live, "actors/inflight": actors.inflight})
        if actors.live < actors_cfg.min_live_actors:
            self.counters["wall_seconds"] = time.time() - self.started
            self.publish()
            raise RunStopped(f"{actors.live} of {actors_cfg.num_actors} self-play actors alive, fewer than "
                             f"actors.min_live_actors={actors_cfg.min_live_actors} (restarts used up: "
                             f"actors.max_restarts={actors_cfg.max_restarts}); final checkpoint "
                             f"{self.checkpointer.directory / f'ckpt-{self.last_saved_step}'}")

    def _save_games(self, games: list, moves: int, seconds: float) -> None:
        """Finished games to replay, with their figures; `moves` played in `seconds`."""
        self.selfplay_seconds += seconds
        self.selfplay_moves += moves
        self.counters["env_steps"] += moves
        for game in games:
            self.replay_buffer.save_game(game)
            self.returns.append(game.episode_return())
            self.summaries.scalars(self.learner.training_step, {
                "selfplay/episode_return": game.episode_return(),
                "selfplay/episode_length": len(game),
                "mcts/root_value": float(np.mean(game.root_values)),
            })
        if games:
            self.summaries.scalars(self.learner.training_step, {
                "selfplay/moves_per_sec": self.selfplay_moves / max(self.selfplay_seconds, 1e-9),
                "selfplay/env_steps": self.counters["env_steps"],
                "replay/games": len(self.replay_buffer),
                "replay/games_saved": self.replay_buffer.games_saved,
            })

    def _evaluate(self, step: int) -> np.ndarray:
        started = time.time()
        returns = evaluate_network(self.config, self.storage.latest_network(), self.eval_environments,
                                   self.config.run.eval_episodes, self.eval_rng, self.eval_searcher)
        self.counters["eval_seconds"] += time.time() - started
        wall = time.time() - self.started
        self.summaries.scalars(step, {"eval/mean_return": returns.mean(), "eval/std_return": returns.std()})
        with open(self.run_dir / EVAL_FILE, "a", newline="") as f:
            csv.writer(f).writerow([step, self.counters["env_steps"], self.replay_buffer.games_saved, f"{wall:.1f}",
                                    f"{self.counters['eval_seconds']:.1f}", f"{returns.mean():.2f}",
                                    f"{returns.std():.2f}"])
        logging.info("eval at step %d: greedy return %.1f +- %.1f over %d episodes (%.0fs)",
                     step, returns.mean(), returns.std(), len(returns), wall)
        self.last_eval, self.last_eval_step = returns, step
        return returns

    def _maybe_print_progress(self) -> None:
        now = time.time()
        interval = now - self.last_print
        if interval < self.config.run.log_every_seconds:
            return
        step, moves = self.learner.training_step, self.counters["env_steps"]
        metrics = self.last_metrics
        recent = np.mean(self.returns) if self.returns else float("nan")
        loss = (f"loss {metrics['loss/total']:.3f} (v {metrics['loss/value']:.3f} r {metrics['loss/reward']:.3f} "
                f"p {metrics['loss/policy']:.3f})") if metrics else "loss -"
        logging.info("step %d/%d | games %d | moves %d | return(last %d) %.1f | %s | %.0f moves/s %.1f steps/s | "
                     "batch %.2f of a step | %.0fs%s", step, self.config.train.training_steps,
                     self.replay_buffer.games_saved, moves, len(self.returns), recent, loss,
                     (moves - self.moves_at_print) / interval, (step - self.steps_at_print) / interval,
                     self.batch_fraction, now - self.started, self._actors_progress())
        self.last_print, self.steps_at_print, self.moves_at_print = now, step, moves

    def _actors_progress(self) -> str:
        if self.actors is None:
            return ""
        return (f" | actors {self.actors.live} live, {self.actors.restarts} restarts, "
                f"{self.actors.inflight} calls in flight")


def _truncate_eval_csv(path: Path, step: int) -> None:
    """Drops evaluations logged after `step` (they happened after the checkpoint resumed from)."""
    if not path.is_file():
        return
    with open(path, newline="") as f:
        rows = [row for row in csv.DictReader(f) if int(row["training_step"]) <= step]
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=EVAL_COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    write_atomically(path, text.getvalue())


def train(config: MuZeroConfig, run_dir: Path, observation_shape: tuple[int, ...], resume: bool = False,
          backend: str = "local", ray_address: str | None = None) -> dict:
    """Runs (or resumes) training in `run_dir`; see `Trainer`."""
    return Trainer(config, run_dir, observation_shape, resume=resume, backend=backend,
                   ray_address=ray_address).run()


def evaluate(run_dir: Path, episodes: int, seed: int = 12345) -> tuple[np.ndarray, int]:
    """Greedy episodes with the run's newest complete checkpoint; returns (returns, training step)."""
    from muzero.checkpoints import Checkpointer
    from muzero.config_io import load_config
    from muzero.models import make_network
    from muzero.selfplay import CompiledSelfPlaySearch

    config = load_config(run_dir / CONFIG_FILE)
    environments = make_environments(config, episodes if config.selfplay.batched else 1, seed)
    observation_shape = environments[0].observation_shape
    network = make_network(config, observation_shape)
    step, _ = Checkpointer(run_dir / CHECKPOINT_DIR, network, optimizer=None).restore()
    rng = np.random.default_rng(seed)
    searcher = None
    if config.network.kind == "resnet":  # its published weights run only in the compiled search
        searcher = CompiledSelfPlaySearch(config, observation_shape, episodes)
    return evaluate_network(config, network.numpy_network(step), environments, episodes, rng, searcher), step
