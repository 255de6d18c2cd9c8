"""The progress line on the terminal: where the run is, how fast it goes."""

from __future__ import annotations

import time
from collections import deque

import numpy as np
from absl import logging


class ProgressReporter:
    """Prints one progress line every `every_seconds` (absl logging, so it also reaches a log file).

    Args:
      training_steps: the run's target step.
      every_seconds: `run.log_every_seconds`.
      step, moves: where the run starts (a resumed run: not 0).
      started: the run's start time, as time.time(), resumed runs' earlier time included.
    """

    def __init__(self, training_steps: int, every_seconds: float, step: int, moves: int, started: float):
        self.training_steps = training_steps
        self.every_seconds = every_seconds
        self.started = started
        self.last_print, self.steps_at_print, self.moves_at_print = time.time(), step, moves
        self.returns: deque[float] = deque(maxlen=20)

    def add_return(self, episode_return: float) -> None:
        """A self-play game ended with this return (the line shows the mean of the last 20)."""
        self.returns.append(episode_return)

    def maybe_print(self, step: int, games: int, moves: int, metrics: dict, batch_fraction: float,
                    extra: str = "") -> None:
        now = time.time()
        interval = now - self.last_print
        if interval < self.every_seconds:
            return
        recent = np.mean(self.returns) if self.returns else float("nan")
        loss = (f"loss {metrics['loss/total']:.3f} (v {metrics['loss/value']:.3f} r {metrics['loss/reward']:.3f} "
                f"p {metrics['loss/policy']:.3f})") if metrics else "loss -"
        logging.info("step %d/%d | games %d | moves %d | return(last %d) %.1f | %s | %.0f moves/s %.1f steps/s | "
                     "batch %.2f of a step | %.0fs%s", step, self.training_steps, games, moves, len(self.returns),
                     recent, loss, (moves - self.moves_at_print) / interval, (step - self.steps_at_print) / interval,
                     batch_fraction, now - self.started, extra)
        self.last_print, self.steps_at_print, self.moves_at_print = now, step, moves
