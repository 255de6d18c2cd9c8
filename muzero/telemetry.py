"""What a training run shows in TensorBoard besides its evaluations, and when.

The loop (`muzero.runner.Trainer`) reports what happened (a training step, a burst of steps,
self-play games collected, a skipped update); `Telemetry` turns that into summaries at a
pace that costs the learner little: the step's losses every `SUMMARY_EVERY` steps, the batch
time, priorities and value histograms every `SLOW_SUMMARY_EVERY`, observation frames of image
games every `IMAGE_EVERY`. Tags are listed in docs/tensorboard.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from muzero.progress import RecentRate
from muzero.replay import Batch
from muzero.summaries import ReplayFootprint, Summaries, observation_frames, visit_entropy

# Training-step summaries every this many steps (and at the run's last step).
SUMMARY_EVERY = 10
# Batch-building time, priorities, value histograms: every this many steps (and at the last).
SLOW_SUMMARY_EVERY = 100
# Positions of the batch whose predicted values and targets go into the histograms.
HISTOGRAM_POSITIONS = 256
# Image games: a few observation frames of a self-play game every this many training steps.
IMAGE_EVERY = 1000


class Telemetry:
    """The run's TensorBoard writer and the timings and rates it reports.

    Args:
      logdir: the run folder (event files go there).
      training_steps: the run's last step (its summaries are always written).
      image_game: observations are images [H, W, C] (frames go into `selfplay/observations`).
    """

    def __init__(self, logdir: str, training_steps: int, image_game: bool):
        self.summaries = Summaries(logdir)
        self.training_steps = training_steps
        self.image_game = image_game
        self.last_image_step: int | None = None
        self.replay_footprint = ReplayFootprint()
        self.move_rate = RecentRate()  # self-play moves against seconds spent in self-play
        self.histogram_batch: tuple[Batch, np.ndarray] | None = None
        self.batch_seconds = self.step_seconds = 0.0
        self.learner_seconds, self.learner_steps = 0.0, 0
        self.selfplay_seconds, self.selfplay_moves = 0.0, 0
        # Building a batch from replay, as a fraction of the training step it feeds.
        self.batch_fraction = float("nan")

    def start(self, config_text: str, hparams: Mapping[str, bool | int | float | str], trial_id: str) -> None:
        """A fresh run: the config as text and its flattened values in the hparams table."""
        self.summaries.text("config", "```\n" + config_text + "\n```")
        self.summaries.hparams(hparams, trial_id=trial_id)

    def close(self) -> None:
        self.summaries.close()

    # ----- the learner -----

    def histogram_step(self, step: int) -> bool:
        return step % SLOW_SUMMARY_EVERY == 0 or step == self.training_steps

    def keep_batch(self, batch: Batch, next_step: int) -> None:
        """Keeps a copy of the first rows of the batch of a step that writes value histograms."""
        if self.histogram_step(next_step):
            rows = slice(0, HISTOGRAM_POSITIONS)
            self.histogram_batch = (
                batch.take(rows),  # every field cut alike; copies, so the sampled arrays are not kept
                np.array(batch.target_value[rows, 0], np.float32),
            )

    def training_step(
        self,
        step: int,
        metrics: dict,
        learning_rate: Callable[[], float],
        last: bool,
        batch_seconds: float,
        step_seconds: float,
        slow_metrics: Callable[[], dict[str, float]],
        predict_values: Callable[[Batch], np.ndarray],
    ) -> None:
        """After a finite update: its losses and `learning_rate()`, and every SLOW_SUMMARY_EVERY steps the batch
        fraction, `slow_metrics()` (priorities, Reanalyse) and the value histograms, whose
        predictions `predict_values(batch)` ([B] values at k = 0) makes after the update."""
        self.batch_seconds += batch_seconds
        self.step_seconds += step_seconds
        if step % SUMMARY_EVERY == 0 or last or any(name.startswith("grad/") for name in metrics):
            self.summaries.scalars(step, {**metrics, "train/lr": learning_rate()})
        if step % SLOW_SUMMARY_EVERY == 0:
            self.batch_fraction = self.batch_seconds / max(self.step_seconds, 1e-9)
            self.batch_seconds = self.step_seconds = 0.0
            self.summaries.scalars(step, {"train/batch_fraction": self.batch_fraction, **slow_metrics()})
        if self.histogram_step(step) and self.histogram_batch is not None:
            batch, target = self.histogram_batch
            self.histogram_batch = None
            predicted = predict_values(batch)
            self.summaries.histograms(
                step, {"values/predicted": predicted, "values/target": target, "values/error": predicted - target}
            )

    def learner_burst(self, step: int, seconds: float, steps: int) -> None:
        """The learner's own speed (bursts of training, not the self-play between them), written
        once SUMMARY_EVERY steps have gathered rather than after every burst."""
        self.learner_seconds += seconds
        self.learner_steps += steps
        if self.learner_steps >= SUMMARY_EVERY:
            self.summaries.scalars(step, {"train/steps_per_sec": self.learner_steps / max(self.learner_seconds, 1e-9)})
            self.learner_seconds, self.learner_steps = 0.0, 0

    def nonfinite(self, step: int, skips: int) -> None:
        self.summaries.scalars(step, {"train/nonfinite_skips": skips})

    # ----- self-play -----

    def games_collected(
        self, step: int, env_steps: int, games: list, moves: int, seconds: float, replay_buffer, source_metrics: dict
    ) -> None:
        """Self-play handed `games` (`moves` moves in `seconds`) to `replay_buffer`: each game's
        return, length and search figures, the move rate and the buffer's size."""
        self.selfplay_seconds += seconds
        self.selfplay_moves += moves
        self.move_rate.add(self.selfplay_seconds, self.selfplay_moves)
        for game in (game for game in games if not game.partial):  # games and last segments
            self.summaries.scalars(
                step,
                {
                    "selfplay/episode_return": game.episode_return(),
                    "selfplay/episode_length": game.episode_length(),
                    "mcts/root_value": float(np.mean(game.root_values)),
                    "mcts/root_visit_entropy": visit_entropy(game.child_visits),
                },
            )
            # The same returns against environment steps (the moves played up to this collection).
            self.summaries.scalars(env_steps, {"selfplay/episode_return_by_env_step": game.episode_return()})
        if games:
            positions, nbytes = self.replay_footprint.measure(replay_buffer.games)
            moves_per_sec = self.move_rate.rate()
            self.summaries.scalars(
                step,
                {
                    **({"selfplay/moves_per_sec": moves_per_sec} if math.isfinite(moves_per_sec) else {}),
                    "selfplay/env_steps": env_steps,
                    "replay/games": len(replay_buffer),
                    "replay/games_saved": replay_buffer.games_saved,
                    "replay/positions": positions,
                    "replay/bytes": nbytes,
                },
            )
            if self.image_game and (self.last_image_step is None or step - self.last_image_step >= IMAGE_EVERY):
                frames = observation_frames(games[0].observations)
                if frames is not None:
                    self.summaries.images(step, "selfplay/observations", frames)
                    self.last_image_step = step
        self.summaries.scalars(step, source_metrics)
