"""What the run tells a person: the progress line on the terminal, and the run's log file.

Everything goes through absl logging, so that `log_to_file` copies it into
RUN_DIR/log.txt as well.
"""

from __future__ import annotations

import logging as std_logging
import math
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import numpy as np
from absl import logging

# The ETA uses the training speed over this many recent seconds (not since the start:
# the first minutes hold compilation and waiting for replay.min_games).
RATE_WINDOW_SECONDS = 120.0

_file_handler: std_logging.Handler | None = None


def log_to_file(path: Path) -> None:
    """Copies every absl log line of this process into `path` (appended to: a resumed run's
    lines follow the earlier run's). Replaces the file an earlier call named."""
    global _file_handler
    absl_logger = logging.get_absl_logger()
    if _file_handler is not None:
        absl_logger.removeHandler(_file_handler)
        _file_handler.close()
    handler = std_logging.FileHandler(path, mode="a", encoding="utf-8")
    handler.setFormatter(logging.PythonFormatter())
    for line_filter in logging.get_absl_handler().filters:  # the terminal's filters (cli.py): the same lines
        handler.addFilter(line_filter)
    absl_logger.addHandler(handler)
    _file_handler = handler


def format_duration(seconds: float) -> str:
    """`3725` -> "1:02:05"; "-" when unknown (not finite or negative)."""
    if not math.isfinite(seconds) or seconds < 0:
        return "-"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


class RecentRate:
    """Events per second over the last `window` seconds (moves/s, steps/s), not since the start.

    `add(time, count)` records the running total `count` at `time` (any clock: wall time,
    or seconds spent in self-play); `rate()` is the count gained per second between the
    oldest and the newest sample kept: those at most `window` before the newest, and
    always the last two.
    """

    def __init__(self, window: float = RATE_WINDOW_SECONDS):
        self.window = window
        self.samples: deque[tuple[float, float]] = deque()

    def add(self, now: float, count: float) -> None:
        self.samples.append((now, count))
        while len(self.samples) > 2 and now - self.samples[0][0] > self.window:
            self.samples.popleft()

    def rate(self) -> float:
        """Count per second; nan with fewer than two samples or no time between them."""
        if len(self.samples) < 2:
            return float("nan")
        (t0, c0), (t1, c1) = self.samples[0], self.samples[-1]
        return (c1 - c0) / (t1 - t0) if t1 > t0 else float("nan")


class ProgressReporter:
    """Prints one progress line every `every_seconds` (absl logging, so it also reaches log.txt):

        step 1200/20000 (6.0%) ETA 0:04:10 | games 310 | moves 9120 | return(last 20) 57.3 | loss ... |
        220 moves/s 40.1 steps/s | batch 0.12 of a step | 45s

    A figure not known yet (no game finished, no step taken) is shown as "-".

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
        now = time.time()
        self.last_print, self.steps_at_print, self.moves_at_print = now, step, moves
        self.returns: deque[float] = deque(maxlen=20)
        self.step_rate = RecentRate()
        self.step_rate.add(now, step)

    def add_return(self, episode_return: float) -> None:
        """A self-play game ended with this return (the line shows the mean of the last 20)."""
        self.returns.append(episode_return)

    def note(self, message: str, *args) -> None:
        """A line saying what the run is busy with (compiling, evaluating), so a silence has a reason."""
        logging.info(message, *args)

    def eta_seconds(self, step: int) -> float:
        """Seconds to `training_steps` at the recent training speed; nan while it is unknown."""
        rate = self.step_rate.rate()
        if not rate > 0:
            return float("nan")
        return max(self.training_steps - step, 0) / rate

    def maybe_print(
        self,
        step: int,
        games: int,
        moves: int,
        metrics: dict,
        batch_fraction: float,
        extra: Callable[[], str] | None = None,
    ) -> None:
        """The progress line, when `every_seconds` passed since the last; `extra` gives the
        self-play source's part of it, asked for only then (the loop calls this every step)."""
        now = time.time()
        interval = now - self.last_print
        if interval < self.every_seconds:
            return
        self.step_rate.add(now, step)
        recent = f"{np.mean(self.returns):.1f}" if self.returns else "-"
        loss = "loss -"
        if metrics:
            parts = f"v {metrics['loss/value']:.3f} r {metrics['loss/reward']:.3f} p {metrics['loss/policy']:.3f}"
            if "loss/consistency" in metrics:  # train.consistency_loss_weight > 0
                parts += f" c {metrics['loss/consistency']:.3f}"
            loss = f"loss {metrics['loss/total']:.3f} ({parts})"
        batch = f"{batch_fraction:.2f}" if math.isfinite(batch_fraction) else "-"
        percent = 100.0 * step / self.training_steps
        logging.info(
            "step %d/%d (%.1f%%) ETA %s | games %d | moves %d | return(last %d) %s | %s | %.0f moves/s "
            "%.1f steps/s | batch %s of a step | %.0fs%s",
            step,
            self.training_steps,
            percent,
            format_duration(self.eta_seconds(step)),
            games,
            moves,
            len(self.returns),
            recent,
            loss,
            (moves - self.moves_at_print) / interval,
            (step - self.steps_at_print) / interval,
            batch,
            now - self.started,
            extra() if extra is not None else "",
        )
        self.last_print, self.steps_at_print, self.moves_at_print = now, step, moves
