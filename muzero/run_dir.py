"""The layout of a run directory, readable without TensorFlow.

    RUN_DIR/config.yaml          the resolved config
    RUN_DIR/events.out.tfevents.* TensorBoard
    RUN_DIR/eval.csv             greedy evaluations
    RUN_DIR/checkpoints/         ckpt-S.{index,data-*}, state-S.pkl, ckpt-S.complete
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

CONFIG_FILE = "config.yaml"
CHECKPOINT_DIR = "checkpoints"
EVAL_FILE = "eval.csv"

_MARKER = re.compile(r"^ckpt-(\d+)\.complete$")


def complete_steps(directory: str | Path) -> list[int]:
    """Steps of the complete checkpoints in `directory` (marker and all files present), newest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    steps = []
    for entry in directory.iterdir():
        match = _MARKER.match(entry.name)
        if match and checkpoint_files_present(directory, int(match.group(1))):
            steps.append(int(match.group(1)))
    return sorted(steps, reverse=True)


def checkpoint_files_present(directory: Path, step: int) -> bool:
    return ((directory / f"ckpt-{step}.index").is_file() and (directory / f"state-{step}.pkl").is_file()
            and any(directory.glob(f"ckpt-{step}.data-*")))


def write_atomically(path: Path, data: bytes | str | Callable[[BinaryIO], None]) -> None:
    """Writes `data` to `path` all or nothing: a temporary file, fsync'ed, then renamed over it.

    Args:
      data: the contents, or a function that writes them to the open binary file.
    """
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        if callable(data):
            data(f)
        else:
            f.write(data.encode() if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
