"""What the benchmark scripts share: the command line of one `muzero train` run.

The scripts sit beside this file and import it as `benchlib` (Python puts a script's own
folder first on `sys.path`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path


def train_command(config: str | Path, run_dir: Path, seed: int, overrides: Iterable[str] = ()) -> list[str]:
    """The argv of `muzero train --config CONFIG --logdir RUN_DIR` with `run.seed` and `--set` overrides.

    Runs the CLI module with this interpreter (`python -m muzero.cli`), so that a benchmark
    trains with the environment it was started in, whether or not `muzero` is on PATH.
    """
    command = [sys.executable, "-m", "muzero.cli", "train", "--config", str(config), "--logdir", str(run_dir)]
    for override in (f"run.seed={seed}", *overrides):
        command += ["--set", override]
    return command
