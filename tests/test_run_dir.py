"""Tests for muzero/run_dir.py: one owner per run directory, new names, all-or-nothing writes."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from muzero.run_dir import LOCK_FILE, complete_steps, create_run_dir, lock_run_dir, write_atomically
from tests.helpers import ROOT, TINY, muzero_command


def test_same_second_default_names_differ(tmp_path, monkeypatch):
    from muzero import run_dir

    # The CLI's default: runs/<config name>-<date-time>. Three runs in the same second get
    # three folders, each created by this call (not found existing) and owned by this process.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(run_dir.time, "strftime", lambda fmt: "20250101-120000")
    names = [run_dir.new_default_run_dir(TINY).name for _ in range(3)]
    assert names == ["tiny-20250101-120000", "tiny-20250101-120000-2", "tiny-20250101-120000-3"]
    assert f"pid {os.getpid()} " in (tmp_path / "runs" / names[2] / LOCK_FILE).read_text()
    # create_run_dir itself never hands out a folder that exists.
    (tmp_path / "other").mkdir()
    assert create_run_dir(tmp_path, "other").name == "other-2"


def _one_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, lines
    return lines[0]


@pytest.mark.slow
def test_a_second_process_is_refused_and_kill_9_frees_the_lock(tmp_path):
    run_dir = tmp_path / "run"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "muzero.cli",
            "train",
            "--backend",
            "local",
            "--config",
            TINY,
            "--logdir",
            str(run_dir),
            "--set",
            "train.training_steps=100000",
            "--set",
            "train.checkpoint_interval=1",
        ],
        cwd=ROOT,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 120
        while not complete_steps(run_dir / "checkpoints"):  # a checkpoint, so that --resume gets to the lock
            assert holder.poll() is None and time.time() < deadline, "the first run did not reach a checkpoint"
            time.sleep(0.05)
        # The holder, as its lock file says: "pid N on host H since <date time>".
        owner = f"in use by pid {holder.pid} on host {socket.gethostname()} since "
        line = _one_line(muzero_command("train", "--config", TINY, "--logdir", str(run_dir)))
        assert line.startswith(f"muzero train: error: {run_dir}: {owner}"), line
        line = _one_line(muzero_command("train", "--resume", str(run_dir)))
        assert line.startswith(f"muzero train: error: {run_dir}: {owner}"), line
        assert holder.poll() is None  # the refused ones changed nothing for the first
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The kernel released the lock with the process: this one can take it.
    lock_run_dir(run_dir)
    assert (run_dir / LOCK_FILE).read_text().startswith(f"pid {os.getpid()} on host ")


# Another process trying to take the lock on sys.argv[1]; prints the refusal.
_SECOND_OWNER = """
import sys
from pathlib import Path
from muzero.run_dir import RunDirInUse, lock_run_dir
try:
    lock_run_dir(Path(sys.argv[1]))
except RunDirInUse as error:
    print(error)
"""


def test_a_run_directory_is_locked_once_per_process(tmp_path):
    lock_run_dir(tmp_path)
    lock_run_dir(tmp_path)  # the owner asking again (the CLI, then the Trainer) is no conflict
    probe = subprocess.run(
        [sys.executable, "-c", _SECOND_OWNER, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert probe.stdout.startswith(f"{tmp_path}: in use by pid {os.getpid()} on host "), probe.stderr


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "eval.csv"
    write_atomically(path, "old\n")

    def full_disk(f):
        f.write(b"new, half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space left on device"):
        write_atomically(path, full_disk)
    assert path.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["eval.csv"]


@pytest.mark.parametrize(
    "name, make, fragment",
    [
        # log.txt a folder: appending the resumed run's lines would fail after start-up.
        ("log.txt", lambda path: path.mkdir(), "expected a file, found a folder; move it away to resume"),
        ("eval.csv", lambda path: path.mkdir(), "expected a file, found a folder; move it away to resume"),
        # backend.txt a folder: its record would fail once the resumed run saves a checkpoint.
        ("backend.txt", lambda path: path.mkdir(), "expected a file, found a folder; move it away to resume"),
        (
            "eval.csv",
            lambda path: path.symlink_to(path.parent / "nowhere"),
            "expected a file, found a broken symbolic link; move it away to resume",
        ),
        ("videos", lambda path: path.write_text("x"), "expected a folder, found a file; move it away to resume"),
        ("games", lambda path: path.write_text("x"), "expected a folder, found a file; move it away to resume"),
    ],
)
def test_a_run_file_that_is_not_what_it_should_be_exits_2_on_resume(tiny_run, tmp_path, name, make, fragment):
    from tests.helpers import copy_run

    run_dir = copy_run(tiny_run, tmp_path / "run")
    path = run_dir / name
    if path.is_dir():
        import shutil

        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    make(path)
    before = sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*"))
    result = muzero_command("train", "--resume", str(run_dir))
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == [f"muzero train: error: {path}: {fragment}"]
    # Nothing else touched: the same entries as before (the lock comes and goes).
    assert sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*")) == before


def test_resume_backend_choices(tmp_path, monkeypatch):
    import importlib.util

    from absl import logging

    from muzero.commands import resume_backend
    from muzero.run_dir import record_backend

    # A run from before backend.txt: the flag as given, nothing logged.
    assert resume_backend(tmp_path, "auto", None) == ("auto", None)
    record_backend(tmp_path, "local")
    adopted = f"back end: local (the run's own, {tmp_path / 'backend.txt'}; --backend to change)"
    assert resume_backend(tmp_path, "auto", None) == ("local", (logging.INFO, adopted))
    assert resume_backend(tmp_path, "local", None) == ("local", None)
    # Ray named, by flag or by a cluster's address, for a run of the exact loop: a warning.
    for backend, address in (("ray", None), ("auto", "127.0.0.1:6379")):
        assert resume_backend(tmp_path, backend, address) == (
            backend,
            (logging.WARNING, "back end: ray, where the run trained on local until now: this resume is not bit-exact"),
        )
    record_backend(tmp_path, "ray")
    assert resume_backend(tmp_path, "local", None) == ("local", None)  # leaving Ray loses no exactness
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object() if name == "ray" else real_find_spec(name))
    adopted = f"back end: ray (the run's own, {tmp_path / 'backend.txt'}; --backend to change)"
    assert resume_backend(tmp_path, "auto", None) == ("ray", (logging.INFO, adopted))
    # Ray gone since: auto resolves as for a new run (local, and says why), nothing adopted.
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "ray" else real_find_spec(name))
    assert resume_backend(tmp_path, "auto", None) == ("auto", None)
    (tmp_path / "backend.txt").write_text("carrier pigeon\n")  # not a back end: as if absent
    assert resume_backend(tmp_path, "auto", None) == ("auto", None)
