"""The training loop: the pseudocode's `muzero()` loop, resumable, with greedy evaluation.

The pseudocode runs actors (`run_selfplay`) and the learner (`train_network`)
concurrently, talking through `SharedStorage` (networks) and `ReplayBuffer` (games).
Here the loop trains until the training steps reach `train.steps_per_move` times the moves
played so far, then collects self-play from the self-play source with the newest published
network: `LocalSelfPlay` plays in this process, so the two alternate; `RaySelfPlay`'s actors
(the default back end) play on beside the learner, and the loop only collects their finished
games (a source's `concurrent`). It publishes and checkpoints every
`train.checkpoint_interval` steps and evaluates every `run.eval_interval`.

`muzero.builder` makes the parts (`RunParts`) from a config; `Trainer.run` is the loop.
Everything the loop depends on (weights, optimizer, replay, RNG states, counters,
environments and games in progress) is in each checkpoint, so a resumed run continues exactly.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from absl import logging

from muzero.config import RunConfig, TrainConfig
from muzero.progress import ProgressReporter
from muzero.replay import Batch
from muzero.replay.prefetch import BatchPrefetcher
from muzero.run_dir import BACKEND_FILE, record_backend, write_error_reason
from muzero.selfplay import SelfPlayStopped

if TYPE_CHECKING:
    from muzero.builder import RunParts
    from muzero.networks import Network
    from muzero.telemetry import Telemetry


class RunStopped(RuntimeError):
    """The run stopped on purpose (non-finite values, no self-play left); one line for the user."""


@dataclass(frozen=True)
class LoopSettings:
    """What the loop reads from the config (`muzero.builder.loop_settings`).

    Attributes:
      train: the `train` section (steps, ratio, checkpoint interval, non-finite policy).
      run: the `run` section (progress lines, evaluation interval).
      min_games: `replay.min_games`: training waits for this many games.
      search_compile_note: self-play compiles its search on its first move (the note says
        ", XLA" with XLA); None when it does not.
    """

    train: TrainConfig
    run: RunConfig
    min_games: int
    search_compile_note: str | None = None


class Trainer:
    """Runs the loop over a run's parts (`muzero.builder.build_trainer` makes one).

    Args:
      parts: the run's parts, fresh or restored.
      settings: the loop's constants.
      telemetry: the run's TensorBoard writer.
      last_saved_step: the training step of the newest checkpoint (-1 for a fresh run).
      batch_hook: tests only: transforms each sampled batch (fault injection).
    """

    def __init__(
        self,
        parts: RunParts,
        settings: LoopSettings,
        telemetry: Telemetry,
        last_saved_step: int = -1,
        batch_hook: Callable[[Batch], Batch] | None = None,
    ):
        self.parts, self.settings, self.telemetry, self.batch_hook = parts, settings, telemetry, batch_hook
        self.train_settings = settings.train
        # The parts the loop drives, by their pseudocode names.
        self.state, self.network, self.learner = parts.state, parts.network, parts.learner
        self.storage, self.replay_buffer, self.source = parts.storage, parts.replay_buffer, parts.source
        self.target_network, self.reanalyser = parts.target_network, parts.reanalyser
        self.checkpointer, self.evaluator = parts.checkpointer, parts.evaluator
        self.last_saved_step = last_saved_step
        self.backend_recorded = False
        self.selfplay_calls = 0
        self.storage.save_network(self.learner.training_step, self.network)
        self.stop_signal: str | None = None
        self.out_of_time = False
        self.consecutive_nonfinite = 0
        self.last_metrics: dict[str, float] = {}
        self.last_play_end: float | None = None
        # Concurrent self-play: batches are built on a thread beside the learner (made at the
        # first training step; muzero.replay.prefetch says what that costs in exactness).
        self.prefetcher: BatchPrefetcher | None = None

    def publish(self) -> Network:
        """Publishes the network to self-play (pseudocode: `save_network`); returns the published
        network, as self-play and evaluation will run it."""
        self.storage.save_network(self.learner.training_step, self.network)
        return self.storage.latest_network()

    def publish_and_checkpoint(self) -> None:
        """What the pseudocode does every `checkpoint_interval` steps (`save_network`), plus a
        checkpoint of the whole run at this step when it has none yet."""
        self.publish()
        if self.learner.training_step != self.last_saved_step:
            self.save_checkpoint()

    def save_checkpoint(self) -> None:
        """A checkpoint of the run at this training step; a failed write stops the run."""
        from muzero.checkpoints import CheckpointWriteError

        self.state.counters["wall_seconds"] = time.time() - self.started
        step = self.learner.training_step
        try:
            self.checkpointer.save(step, self.parts.state_dict())
        except CheckpointWriteError as error:  # disk full: the run cannot go on, nothing is lost
            raise RunStopped(str(error)) from None
        self.last_saved_step = step
        self.parts.journal.checkpointed(self.replay_buffer.games_saved)
        if not self.backend_recorded:  # a resume without --backend continues on this one
            run_dir = self.checkpointer.directory.parent
            try:
                record_backend(run_dir, self.parts.backend)
            except OSError as error:
                raise RunStopped(
                    f"cannot write {run_dir / BACKEND_FILE} ({write_error_reason(error)}); {self._last_checkpoint()}"
                ) from None
            self.backend_recorded = True

    # The pseudocode's muzero(): self-play and training alternate, the network is
    # published (and checkpointed) every checkpoint_interval steps.
    def run(self) -> dict:
        """Trains until `train.training_steps`, `run.time_limit_minutes` or a stop signal; returns the final figures."""
        from muzero.summaries import SummaryWriteError

        counters = self.state.counters
        train_steps = self.train_settings.training_steps
        self.started = time.time() - counters["wall_seconds"]
        self.progress = ProgressReporter(
            self.train_settings.training_steps,
            self.settings.run.log_every_seconds,
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
                self._print_progress()
            # Ended by run.time_limit_minutes (not by the steps or a signal), before the final work.
            self.out_of_time = self.stop_signal is None and self.learner.training_step < train_steps
            # Final checkpoint; a second Ctrl-C while it is written is ignored.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            self.evaluator.join()
            self.publish_and_checkpoint()
            if self.stop_signal is None and self.evaluator.last_step != self.learner.training_step:
                self._evaluate()
        except SummaryWriteError as error:  # disk full: TensorBoard's events went first
            raise RunStopped(f"{error}; {self._last_checkpoint()}") from None
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if self.prefetcher is not None:
                self.prefetcher.close()
            self.telemetry.close()
            self.parts.close()
        return self._result()

    def _print_progress(self) -> None:
        """A progress line, at most every `run.log_every_seconds`."""
        self.progress.maybe_print(
            self.learner.training_step,
            self.replay_buffer.episodes_saved,
            self.state.counters["env_steps"],
            self.last_metrics,
            self.telemetry.batch_fraction,
            self.source.progress,
        )

    def _done(self) -> bool:
        return (
            self.learner.training_step >= self.train_settings.training_steps
            or self.stop_signal is not None
            or self._out_of_time()
        )

    def _out_of_time(self) -> bool:
        """`run.time_limit_minutes` reached: the run's training time over all its sessions (`self.started` is set
        back by the time a resumed run trained before)."""
        limit = self.settings.run.time_limit_minutes
        return limit > 0 and time.time() - self.started >= limit * 60

    def _on_signal(self, signum: int, frame) -> None:
        self.stop_signal = signal.Signals(signum).name
        logging.warning("%s received: stopping after the current step with a final checkpoint", self.stop_signal)

    def train_to_ratio(self) -> None:
        """Learner: train while behind `steps_per_move` training steps per self-play move."""
        from muzero.training import train_on_replay

        train = self.train_settings
        if len(self.replay_buffer) < self.settings.min_games:
            return
        moves = self.state.counters["stored_moves" if train.count_stored_moves else "env_steps"]
        target = min(int(moves * train.steps_per_move), train.training_steps)
        started, steps_before = time.time(), self.learner.training_step
        while self.learner.training_step < target and not self._done():
            if self.learner.tracing_count() == 0:
                self.progress.note(
                    "compiling the training step (the first step traces it%s)",
                    " and compiles it with XLA" if train.jit_compile else "",
                )
            if self.prefetcher is None and self.source.concurrent:
                self.prefetcher = BatchPrefetcher(
                    self.replay_buffer, self.learner.train.num_unroll_steps, self.learner.td_steps
                )
            result = train_on_replay(self.learner, self.replay_buffer, self._keep_batch, self.prefetcher)
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
            self.telemetry.training_step(
                step,
                result.metrics,
                lambda: float(self.learner.optimizer.learning_rate),
                last=self._done(),
                batch_seconds=result.batch_seconds,
                step_seconds=result.step_seconds,
                slow_metrics=self._slow_metrics,
                predict_values=self._predict_values,
            )
            if step % train.checkpoint_interval == 0:
                self.publish_and_checkpoint()
            if self.settings.run.eval_interval and step % self.settings.run.eval_interval == 0:
                self._evaluate(background=self.source.concurrent)
            # Within a burst too: catching up on a long warm-up (Freeway's: 7,888 steps) takes minutes.
            self._print_progress()
        self.telemetry.learner_burst(
            self.learner.training_step, time.time() - started, self.learner.training_step - steps_before
        )

    def _keep_batch(self, batch: Batch) -> Batch:
        """The batch hook of every step: the tests' `batch_hook`, then telemetry's copy of the
        rows that go into value histograms."""
        if self.batch_hook is not None:
            batch = self.batch_hook(batch)
        self.telemetry.keep_batch(batch, self.learner.training_step + 1)
        return batch

    def _slow_metrics(self) -> dict[str, float]:
        metrics = {"replay/priority_mean": self.replay_buffer.priority_mean()}
        if self.reanalyser is not None:
            metrics.update(self.reanalyser.metrics(self.replay_buffer))
        return metrics

    def _predict_values(self, batch: Batch) -> np.ndarray:
        """[B] values at k = 0 of the network for `batch`'s observations, as the learner sees them."""
        observation = self.learner.prepare(batch._replace(importance_weight=None)).observation
        return np.asarray(self.network.initial_inference(observation).value, np.float32).reshape(-1)

    def self_play(self) -> None:
        """Self-play: the source's finished games go to replay, with their figures."""
        note = self.settings.search_compile_note
        if self.selfplay_calls == 0 and not self.source.concurrent and note is not None:
            self.progress.note("compiling the self-play search (first move%s)", note)
        self.selfplay_calls += 1
        # Moves per second of self-play: of the time spent playing here, or of all the time
        # since the last collection for actors that play while the learner trains.
        started = time.time()
        if self.source.concurrent and self.last_play_end is not None:
            started = self.last_play_end
        try:  # `_done` stops actors' waits too: self-play runs only while the steps are short of their end
            games, moves = self.source.play(self.storage, self.state.rng, self._done, self.learner.training_step)
        except SelfPlayStopped as error:
            self.publish_and_checkpoint()
            final = self.checkpointer.directory / f"ckpt-{self.last_saved_step}"
            raise RunStopped(f"{error}; final checkpoint {final}") from None
        self.last_play_end = time.time()
        self.state.counters["env_steps"] += moves
        step, env_steps = self.learner.training_step, self.state.counters["env_steps"]
        if self.source.concurrent:  # on disk first: a run killed before its next checkpoint keeps them
            try:
                self.parts.journal.append(self.replay_buffer.games_saved, games, [step] * len(games))
            except OSError as error:
                raise RunStopped(
                    f"cannot write the game journal in {self.parts.journal.directory} ({error.strerror or error}); "
                    f"{self._last_checkpoint()}"
                ) from None
        for game in games:
            self.replay_buffer.save_game(game, step)
            self.state.counters["stored_moves"] += game.positions()
            if not game.partial:  # a game, or the last segment of one
                self.progress.add_return(game.episode_return())
        metrics = self.source.metrics()
        if self.source.concurrent:  # the replay ratio achieved, against train.steps_per_move
            metrics["loop/steps_per_move"] = step / max(env_steps, 1)
        self.telemetry.games_collected(
            step, env_steps, games, moves, self.last_play_end - started, self.replay_buffer, metrics
        )

    def _last_checkpoint(self) -> str:
        """The end of a stop's line: the checkpoint to resume from."""
        if self.last_saved_step < 0:
            return "no complete checkpoint yet"
        return f"last complete checkpoint {self.checkpointer.directory / f'ckpt-{self.last_saved_step}'}"

    def _on_nonfinite(self, metrics: dict) -> None:
        """A skipped update: count it, and stop when the policy or the bound says so."""
        step, train = self.learner.training_step, self.train_settings
        self.state.counters["nonfinite_skips"] += 1
        self.consecutive_nonfinite += 1
        self.telemetry.nonfinite(step, self.state.counters["nonfinite_skips"])
        last_good = (
            self.checkpointer.directory / f"ckpt-{self.last_saved_step}" if self.last_saved_step >= 0 else "none yet"
        )
        if train.nonfinite == "stop":
            raise RunStopped(
                f"non-finite loss or gradient at training step {step + 1} "
                f"(loss/total={metrics.get('loss/total')}); last good checkpoint: {last_good}"
            )
        logging.warning(
            "non-finite loss or gradient at training step %d: update skipped (%d in a row)",
            step + 1,
            self.consecutive_nonfinite,
        )
        if self.consecutive_nonfinite >= train.max_consecutive_nonfinite:
            raise RunStopped(
                f"{self.consecutive_nonfinite} consecutive non-finite updates up to training step "
                f"{step + 1} (train.max_consecutive_nonfinite); last good checkpoint: {last_good}"
            )

    def _evaluate(self, background: bool = False) -> None:
        """Greedy evaluation of the published network; `background`: on a thread of its own
        (the concurrent loop; skipped while the previous one still runs)."""
        step = self.learner.training_step
        args = (step, self.storage.latest_network(), self.state.counters, self.replay_buffer.episodes_saved)
        if not background:
            self.progress.note(
                "evaluating: %d greedy episodes at training step %d", self.settings.run.eval_episodes, step
            )
            self.evaluator.evaluate(*args, time.time() - self.started)
        elif not self.evaluator.evaluate_in_background(*args, time.time() - self.started):
            logging.info("evaluation at training step %d skipped: the previous one is still running", step)

    def _result(self) -> dict:
        evaluation = self.evaluator.last
        counters = self.state.counters
        result = {
            "training_step": self.learner.training_step,
            "games": self.replay_buffer.episodes_saved,
            "env_steps": counters["env_steps"],
            "wall_seconds": time.time() - self.started,
            "mean_return": evaluation[0] if evaluation is not None else float("nan"),
            "std_return": evaluation[1] if evaluation is not None else float("nan"),
            "stopped_by": self.stop_signal,
            "out_of_time": self.out_of_time,
            "nonfinite_skips": counters["nonfinite_skips"],
        }
        return {**result, **self.source.result()}
