"""What the benchmark scripts share: the command line of one `muzero train` run, timing, tables.

The scripts sit beside this file and import it as `benchlib` (Python puts a script's own
folder first on `sys.path`).
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path


def train_command(
    config: str | Path, run_dir: Path, seed: int, overrides: Iterable[str] = (), backend: str | None = None
) -> list[str]:
    """The argv of `muzero train --config CONFIG --logdir RUN_DIR` with `run.seed` and `--set` overrides.

    Runs the CLI module with this interpreter (`python -m muzero.cli`), so that a benchmark
    trains with the environment it was started in, whether or not `muzero` is on PATH.

    Args:
      backend: `--backend` ("local", "ray", "auto"); None: the CLI's default.
    """
    command = [sys.executable, "-m", "muzero.cli", "train", "--config", str(config), "--logdir", str(run_dir)]
    for override in (f"run.seed={seed}", *overrides):
        command += ["--set", override]
    if backend is not None:
        command += ["--backend", backend]
    return command


def resume_command(run_dir: Path) -> list[str]:
    """The argv of `muzero train --resume RUN_DIR`, with this interpreter as `train_command`:
    the run continues with its own config, seed and time limit."""
    return [sys.executable, "-m", "muzero.cli", "train", "--resume", str(run_dir)]


def median_seconds(call: Callable[[], object], repetitions: int, warmup: int = 1) -> float:
    """Median wall seconds of `call()` over `repetitions` calls, after `warmup` untimed ones
    (tracing, compilation). `call` must wait for its result (e.g. fetch it with `.numpy()`)."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repetitions):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def number(value: float | None, spec: str = ",.1f") -> str:
    """`value` formatted with `spec` for a table; "-" for a figure not measured (None or nan)."""
    if value is None or math.isnan(value):
        return "-"
    return format(value, spec)


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table (the form docs/benchmarks.md quotes)."""
    lines = [f"| {' | '.join(header)} |", f"| {' | '.join('---' for _ in header)} |"]
    lines += [f"| {' | '.join(str(cell) for cell in row)} |" for row in rows]
    return "\n".join(lines)


def write_csv(path: Path, rows: Sequence[dict]) -> None:
    """`rows` as CSV with a header of every key that any row has, in first-seen order."""
    fields = list(dict.fromkeys(key for row in rows for key in row))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def save_figure(fig, out: Path, title: str, bottom: float = 0.0) -> None:
    """`fig` (matplotlib) titled, laid out above the `bottom` share of its height (kept for a
    figure legend) and written to `out` (its folder made), said on stdout."""
    fig.suptitle(title)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
