"""Helpers the tests share: paths, the real command, copies of shared runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "configs" / "tiny.yaml")
ATARI_TINY = str(ROOT / "configs" / "atari" / "tiny.yaml")
TICTACTOE = str(ROOT / "configs" / "tictactoe.yaml")
CONNECT4 = str(ROOT / "configs" / "connect4.yaml")


def muzero_command(
    *args: str, cwd: Path = ROOT, timeout: float = 600, input_text: str | None = None
) -> subprocess.CompletedProcess:
    """Runs `muzero ARGS` as a user would (a new process; stdin: `input_text`, or none); returns it finished.

    `muzero train` runs the interleaved loop (`--backend local`) unless the test names a back
    end: the tests compare numbers, and only that loop is bit-reproducible (the default,
    `auto`, starts Ray actors on a machine with 2 cores or more).
    """
    if args and args[0] == "train" and "--backend" not in args:
        args = (*args, "--backend", "local")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    stdin = subprocess.DEVNULL if input_text is None else None
    return subprocess.run(
        [sys.executable, "-m", "muzero.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        check=False,
        text=True,
        timeout=timeout,
        stdin=stdin,
        input=input_text,
    )


# The shared `tiny_run` (conftest.py): 30 steps, a checkpoint every 5.
TINY_RUN_SETTINGS = ("--set", "train.training_steps=30", "--set", "train.checkpoint_interval=5")


def copy_run(run_dir: Path, destination: Path) -> Path:
    """A copy of a shared run, for a test that changes it."""
    shutil.copytree(run_dir, destination)
    return destination


def checkpoint_files(*steps: int) -> set[str]:
    """What RUN/checkpoints holds when exactly the checkpoints at `steps` are on disk, complete."""
    return {"checkpoint"} | {
        name
        for step in steps
        for name in (
            f"ckpt-{step}.complete",
            f"ckpt-{step}.data-00000-of-00001",
            f"ckpt-{step}.index",
            f"state-{step}.pkl",
        )
    }


def load_script(name: str):
    """scripts/NAME.py as a module, as `python scripts/NAME.py` sees it: scripts/ first on sys.path."""
    import importlib.util

    scripts = str(ROOT / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # where dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def tictactoe_after(*actions: int):
    """OpenSpiel's tic-tac-toe state after `actions` (cells 0-8 row by row, X first)."""
    import pyspiel

    state = pyspiel.load_game("tic_tac_toe").new_initial_state()
    for action in actions:
        state.apply_action(action)
    return state
