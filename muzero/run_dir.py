"""The layout of a run directory, readable without TensorFlow.

    RUN_DIR/config.yaml          the resolved config
    RUN_DIR/lock                 the owner's lock: pid and host of the process writing the run
    RUN_DIR/events.out.tfevents.* TensorBoard
    RUN_DIR/eval.csv             greedy evaluations
    RUN_DIR/log.txt              what the run printed (absl logging), appended to on resume
    RUN_DIR/backend.txt          the back end of the last session that saved a checkpoint
    RUN_DIR/checkpoints/         ckpt-S.{index,data-*}, state-S.pkl, ckpt-S.complete

A run directory has one owner: the process that holds the OS lock on RUN_DIR/lock
(`lock_run_dir`). Readers (`muzero evaluate`) take no lock.

The checks `muzero train`, `evaluate` and `play` make on a run directory before TensorFlow
loads (`prepare_run_dir`, `check_resumable`, `check_finished_run`, ...) raise `RunDirError`,
one line that the CLI prints with exit status 2.
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

CONFIG_FILE = "config.yaml"
CHECKPOINT_DIR = "checkpoints"
EVAL_FILE = "eval.csv"
OPPONENT_FILE = "eval_opponents.csv"  # board games' matches at each evaluation
JOURNAL_DIR = "games"  # the concurrent loop's finished games (muzero/replay/journal.py)
LOCK_FILE = "lock"
LOG_FILE = "log.txt"
# `--resume` without --backend continues on the back end the run last trained on.
BACKEND_FILE = "backend.txt"
BACKENDS = ("local", "ray")

# Run directories this process owns: resolved path -> the open lock file. A second flock on
# another descriptor of the same file would conflict with our own, so each is taken once.
_held: dict[Path, int] = {}


class RunDirInUse(RuntimeError):
    """Another process owns the run directory; `str(error)` is one line naming it."""


class RunDirError(ValueError):
    """A run directory that cannot be used as asked; `str(error)` is one line naming it."""


def lock_run_dir(run_dir: Path) -> None:
    """Makes this process the owner of `run_dir` until it exits (a no-op if it already is).

    The lock is `flock` on RUN_DIR/lock, so the kernel releases it when the process ends,
    however it ends (kill -9 included); the file stays, and says which process holds it:
    its pid and host, written after the lock is taken.

    Raises:
      RunDirInUse: another process holds the lock.
      OSError: the lock file cannot be created.
    """
    key = run_dir.resolve()
    if key in _held:
        return
    fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise RunDirInUse(f"{run_dir}: in use by {holder} (a run directory has one writer at a time)") from None
    except OSError:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(
        fd, f"pid {os.getpid()} on host {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), 0
    )
    _held[key] = fd


def write_error_reason(error: Exception) -> str:
    """One line on why a write failed ("No space left on device", ...): an OSError's, or a
    TensorFlow OpError's without TensorFlow's op and function names."""
    if isinstance(error, OSError):
        return error.strerror or str(error)
    message = (getattr(error, "message", None) or str(error) or type(error).__name__).splitlines()[0]
    return re.sub(r"\{\{[^}]*\}\}\s*|\s*\[Op:\w+\]", "", message)


def _holder(fd: int) -> str:
    """What the lock file says about its holder; it may be a moment before the holder has written it."""
    for _ in range(20):
        text = os.pread(fd, 200, 0).decode(errors="replace").strip()
        if text:
            return text
        time.sleep(0.05)
    return "another process"


def create_run_dir(parent: Path, name: str) -> Path:
    """Creates a new directory parent/NAME, or NAME-2, NAME-3, ... when that one exists.

    Each is created exclusively (mkdir fails if it exists), so runs started in the same
    second under the same default name get folders of their own.
    """
    parent.mkdir(parents=True, exist_ok=True)
    path, n = parent / name, 1
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1
            path = parent / f"{name}-{n}"


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
    return (
        (directory / f"ckpt-{step}.index").is_file()
        and (directory / f"state-{step}.pkl").is_file()
        and any(directory.glob(f"ckpt-{step}.data-*"))
    )


def write_atomically(path: Path, data: bytes | str | Callable[[BinaryIO], None]) -> None:
    """Writes `data` to `path` all or nothing: a temporary file, fsync'ed, then renamed over it.

    Args:
      data: the contents, or a function that writes them to the open binary file.

    Raises:
      OSError: the write failed (disk full, ...); the temporary file is removed and `path`
        is as it was.
    """
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def prepare_run_dir(logdir: Path) -> None:
    """Creates `logdir` (`muzero train --logdir`) and makes this process its owner, refusing
    one that holds files, is in use by another process or cannot be written.

    Raises:
      RunDirError: one of those, in one line.
    """
    if logdir.exists() and not logdir.is_dir():
        raise RunDirError(f"{logdir}: run directory path exists and is not a directory")
    # No lock file is left in a folder of someone else's files; in a run's folder the lock
    # comes first, so that a run still writing there is the one named.
    if not (logdir / LOCK_FILE).exists():
        _check_empty(logdir)
    try:
        logdir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise RunDirError(f"{logdir}: cannot write run directory ({error.strerror})") from None
    hold_run_dir(logdir)
    _check_empty(logdir)
    check_writable(logdir)


def check_new_run_dir(logdir: Path) -> None:
    """`logdir` checked as `prepare_run_dir` would, creating nothing (`--print-config`)."""
    if logdir.exists() and not logdir.is_dir():
        raise RunDirError(f"{logdir}: run directory path exists and is not a directory")
    _check_empty(logdir)


def _check_empty(run_dir: Path) -> None:
    if run_dir.is_dir() and any(entry.name != LOCK_FILE for entry in run_dir.iterdir()):
        raise RunDirError(f"{run_dir}: run directory already holds files; choose a new --logdir")


def new_default_run_dir(config_path: str | Path) -> Path:
    """runs/<config name>-<date-time>, created exclusively (-2, -3, ... when runs start in the
    same second) and owned by this process."""
    try:
        logdir = create_run_dir(Path("runs"), f"{Path(config_path).stem}-{time.strftime('%Y%m%d-%H%M%S')}")
    except OSError as error:
        raise RunDirError(f"runs: cannot create the run directory ({error.strerror})") from None
    hold_run_dir(logdir)
    return logdir


def hold_run_dir(run_dir: Path) -> None:
    """Makes this process the owner of `run_dir` (`lock_run_dir`), or names the owner.

    Raises:
      RunDirError: another process owns it, or the lock file cannot be written.
    """
    try:
        lock_run_dir(run_dir)
    except RunDirInUse as error:
        raise RunDirError(str(error)) from None
    except OSError as error:
        raise RunDirError(f"{run_dir}: cannot write run directory ({error.strerror})") from None


def check_writable(run_dir: Path) -> None:
    """Writes and removes a file in `run_dir`, or says it cannot be written."""
    try:
        probe = run_dir / ".write_test"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise RunDirError(f"{run_dir}: cannot write run directory ({error.strerror})") from None


def check_resumable(run_dir: Path, hold: bool = True) -> list[int]:
    """A run to continue (`muzero train --resume`): its config and a complete checkpoint.

    Args:
      hold: become its owner first, so that a run still writing there is the one message
        (False for `--print-config`, which writes nothing).

    Returns:
      The steps of its complete checkpoints, newest first.
    """
    if not (run_dir / CONFIG_FILE).is_file():
        raise RunDirError(f"{run_dir}: not a run directory (no {CONFIG_FILE})")
    if hold:
        hold_run_dir(run_dir)
    steps = complete_steps(run_dir / CHECKPOINT_DIR)
    if not steps:
        raise RunDirError(f"{run_dir / CHECKPOINT_DIR}: no complete checkpoint to resume from")
    check_run_files(run_dir)
    return steps


# What a resumed run appends to or writes into: files, and folders.
RUN_FILES = (LOG_FILE, EVAL_FILE, OPPONENT_FILE, BACKEND_FILE)
RUN_FOLDERS = ("videos", JOURNAL_DIR)


def check_run_files(run_dir: Path) -> None:
    """The files and folders a resumed run writes are what they should be (a file, a folder)
    and writable, before anything is written.

    Raises:
      RunDirError: the first that is not, in one line.
    """
    for name in RUN_FILES:
        path = run_dir / name
        if path.exists() or path.is_symlink():
            if not path.is_file():
                raise RunDirError(f"{path}: expected a file, found {_kind(path)}; move it away to resume")
            if not os.access(path, os.W_OK):
                raise RunDirError(f"{path}: cannot write it (permission denied)")
    for name in RUN_FOLDERS:
        path = run_dir / name
        if (path.exists() or path.is_symlink()) and not path.is_dir():
            raise RunDirError(f"{path}: expected a folder, found {_kind(path)}; move it away to resume")


def _kind(path: Path) -> str:
    if path.is_symlink() and not path.exists():
        return "a broken symbolic link"
    return "a folder" if path.is_dir() else "a file" if path.is_file() else "something that is neither file nor folder"


def check_finished_run(run_dir: Path) -> list[int]:
    """A finished or running run to read from (`evaluate`, `play`; no lock taken): its config
    and a complete checkpoint. Returns the complete checkpoints' steps, as `check_resumable`."""
    if not (run_dir / CONFIG_FILE).is_file():
        raise RunDirError(f"{run_dir}: not a run directory (no {CONFIG_FILE})")
    steps = complete_steps(run_dir / CHECKPOINT_DIR)
    if not steps:
        raise RunDirError(f"{run_dir / CHECKPOINT_DIR}: no complete checkpoint")
    return steps


def record_backend(run_dir: Path, backend: str) -> None:
    """Writes the back end the run trains on (`BACKEND_FILE`), for a later `--resume`.

    Raises:
      OSError: the write failed; the file is as it was (`write_atomically`).
    """
    write_atomically(run_dir / BACKEND_FILE, backend + "\n")


def recorded_backend(run_dir: Path) -> str | None:
    """The back end `run_dir` last trained on; None for a run from before it was recorded
    (or a file that does not name one)."""
    try:
        text = (run_dir / BACKEND_FILE).read_text().strip()
    except OSError:
        return None
    return text if text in BACKENDS else None
