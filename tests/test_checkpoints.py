"""Tests for muzero/checkpoints.py and the non-finite handling in muzero/runner.py (in process)."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from muzero import checkpoints
from muzero.builder import build_trainer
from muzero.checkpoints import Checkpointer, CheckpointError, CheckpointWriteError
from muzero.config_loader import load_config
from muzero.envs import EnvironmentSpec
from muzero.networks.mlp import MLPNetwork
from muzero.run_dir import complete_steps
from muzero.runner import RunStopped, Trainer
from muzero.training import Learner
from tests.helpers import TINY, checkpoint_files

ROOT = Path(__file__).resolve().parents[1]


def _checkpointer(tmp_path: Path, max_to_keep: int = 3, keep_every_steps: int = 0):
    config = load_config(ROOT / "configs" / "tiny.yaml")
    network = MLPNetwork(config.network, config.action_space_size, observation_size=4)
    learner = Learner(config.train, network)
    return Checkpointer(tmp_path / "checkpoints", network, learner.optimizer, max_to_keep, keep_every_steps), network


def _names(directory: Path) -> set[str]:
    return {entry.name for entry in directory.iterdir()}


def test_save_restore_and_keep_newest(tmp_path):
    checkpointer, network = _checkpointer(tmp_path, max_to_keep=2)
    values = {}
    for step in (10, 20, 30):
        network.trainable_variables[0].assign(np.full(network.trainable_variables[0].shape, step, np.float32))
        checkpointer.save(step, {"step": step})
        values[step] = network.trainable_variables[0].numpy().copy()
    # max_to_keep 2: 10 is gone with its marker and state.
    directory = tmp_path / "checkpoints"
    assert complete_steps(directory) == [30, 20]
    assert _names(directory) == checkpoint_files(20, 30)
    # TensorFlow's index, rewritten from the markers for TensorFlow's tools.
    assert tf.train.latest_checkpoint(str(directory)) == str(directory / "ckpt-30")
    network.trainable_variables[0].assign(np.zeros(network.trainable_variables[0].shape, np.float32))
    step, state = checkpointer.restore()
    assert (step, state) == (30, {"step": 30})
    np.testing.assert_array_equal(network.trainable_variables[0].numpy(), values[30])


def test_pieces_without_marker_are_ignored_and_removed(tmp_path):
    checkpointer, _ = _checkpointer(tmp_path)
    checkpointer.save(10, {"step": 10})
    directory = tmp_path / "checkpoints"
    # A save killed before its marker: TF files and state present, no marker; plus temporaries.
    for name in ("ckpt-20.index", "ckpt-20.data-00000-of-00001", "state-20.pkl", "state-30.pkl.tmp"):
        (directory / name).write_bytes(b"partial")
    assert complete_steps(directory) == [10]
    fresh, _ = _checkpointer(tmp_path)
    assert fresh.restore()[0] == 10
    fresh.prune()  # what every save does after its marker
    assert sorted(p.name for p in directory.iterdir() if "20" in p.name or "30" in p.name) == []


def test_a_garbled_tensorflow_index_changes_nothing(tmp_path):
    checkpointer, _ = _checkpointer(tmp_path)  # max_to_keep 3
    for step in (10, 20, 30):
        checkpointer.save(step, {"step": step})
    directory = tmp_path / "checkpoints"
    (directory / "checkpoint").write_bytes(b"\x00garbage{\xff")
    fresh, _ = _checkpointer(tmp_path)
    assert fresh.restore() == (30, {"step": 30})
    fresh.save(40, {"step": 40})
    fresh.save(50, {"step": 50})
    # By their markers the complete ones are 50, 40, 30, 20, 10: the newest three stay, whole;
    # 10 and 20 go whole (no .data/.index left behind); the index is sound again.
    assert _names(directory) == checkpoint_files(30, 40, 50)
    assert tf.train.latest_checkpoint(str(directory)) == str(directory / "ckpt-50")


def test_rotation_counts_complete_checkpoints_only_and_removes_orphans(tmp_path):
    checkpointer, _ = _checkpointer(tmp_path)  # max_to_keep 3
    for step in (10, 20, 30):
        checkpointer.save(step, {"step": step})
    directory = tmp_path / "checkpoints"
    # A save killed before its marker (40), a marker whose files are gone (35), a killed
    # temporary, and TensorFlow's folder of a write killed (or out of space) at 45.
    for name in (
        "ckpt-40.index",
        "ckpt-40.data-00000-of-00001",
        "state-40.pkl",
        "ckpt-35.complete",
        "state-45.pkl.tmp",
    ):
        (directory / name).write_bytes(b"partial")
    (directory / "ckpt-45_temp").mkdir()
    (directory / "ckpt-45_temp" / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"partial")
    checkpointer.save(50, {"step": 50})
    # Complete: 50, 30, 20, 10 (35 and 40 do not count). The newest three are 50, 30, 20: 20
    # stays although three checkpoints were begun after it; 10 goes; no piece of 35, 40, 45 is left.
    assert _names(directory) == checkpoint_files(20, 30, 50)


def test_keep_checkpoint_every_steps_keeps_older_points_for_good(tmp_path):
    checkpointer, _ = _checkpointer(tmp_path, max_to_keep=2, keep_every_steps=25)
    for step in range(10, 90, 10):
        checkpointer.save(step, {"step": step})
    # The newest two: 80, 70. For good, the first at or after each multiple of 25: 30 (>= 25),
    # 50 (>= 50), 80 (>= 75). Gone: 10, 20 (before 25), 40, 60.
    assert complete_steps(tmp_path / "checkpoints") == [80, 70, 50, 30]


def test_an_older_resume_sets_the_newer_checkpoints_aside(tmp_path):
    checkpointer, _ = _checkpointer(tmp_path)
    for step in (10, 20, 30):
        checkpointer.save(step, {"step": step})
    directory = tmp_path / "checkpoints"
    assert checkpointer.restore(20) == (20, {"step": 20})
    assert checkpointer.restore(10) == (10, {"step": 10})
    folder = checkpointer.set_aside_after(10)
    assert folder.parent == directory and folder.name.startswith("set-aside-")
    assert complete_steps(directory) == [10] and complete_steps(folder) == [30, 20]
    assert checkpointer.set_aside_after(10) is None
    with pytest.raises(CheckpointError, match="no complete checkpoint at step 20"):
        checkpointer.restore(20)
    # The run goes on from 10; its new step 20 and the rotation leave the set-aside ones alone.
    checkpointer.save(20, {"step": "new 20"})
    assert complete_steps(directory) == [20, 10] and complete_steps(folder) == [30, 20]
    assert checkpointer.restore() == (20, {"step": "new 20"})


def _full_disk_after(nbytes: int):
    """A writer for `write_atomically` that writes `nbytes` bytes, then finds the disk full."""

    def write(f):
        f.write(b"x" * nbytes)
        raise OSError(errno.ENOSPC, "No space left on device")

    return write


def _tensorflow_full_disk(self, prefix: str):
    """`tf.train.Checkpoint.write` on a full disk, as TensorFlow 2.21 fails on a full tmpfs: its
    temporary folder is left behind and a ResourceExhaustedError names the part file."""
    part = f"{prefix}_temp/part-00000-of-00001.data-00000-of-00001.tempstate1"
    Path(part).parent.mkdir()
    Path(part).write_bytes(b"partial")
    raise tf.errors.ResourceExhaustedError(
        None,
        None,
        "{{function_node __wrapped__SaveV2_dtypes_2_device_/job:"
        f"localhost/replica:0/task:0/device:CPU:0}}}} {part}; No space left on "
        "device [Op:SaveV2]",
    )


@pytest.mark.parametrize(
    "failing",
    ["state-20.pkl", "ckpt-20_temp/part-00000-of-00001.data-00000-of-00001.tempstate1", "ckpt-20.complete"],
    ids=["state", "tensorflow", "marker"],
)
def test_a_full_disk_leaves_no_piece_and_names_the_last_complete_checkpoint(tmp_path, monkeypatch, failing):
    checkpointer, _ = _checkpointer(tmp_path)
    checkpointer.save(10, {"step": 10})
    directory = tmp_path / "checkpoints"
    if failing.startswith("ckpt-20_temp"):
        monkeypatch.setattr(tf.train.Checkpoint, "write", _tensorflow_full_disk)
    else:
        write_atomically = checkpoints.write_atomically
        monkeypatch.setattr(
            checkpoints,
            "write_atomically",
            lambda path, data: write_atomically(path, _full_disk_after(1000) if path.name == failing else data),
        )
    with pytest.raises(CheckpointWriteError) as info:
        checkpointer.save(20, {"step": 20})
    # One line: the step, the file, the checkpoint to resume from.
    assert str(info.value) == (
        f"cannot write the checkpoint at training step 20: {directory / failing}"
        f"{';' if 'temp' in failing else ':'} No space left on device; the last complete "
        f"checkpoint is {directory / 'ckpt-10'}"
    )
    # Nothing of step 20 is left (no temporary, no TensorFlow folder); 10 is intact and loads.
    assert _names(directory) == checkpoint_files(10)
    monkeypatch.undo()
    assert _checkpointer(tmp_path)[0].restore() == (10, {"step": 10})


# `muzero train ARGS` whose disk is full when the state of step 10 is half written.
_FULL_DISK_AT_STEP_10 = """
import errno, sys
from muzero import checkpoints
from muzero.cli import run

def full_disk(f):
    f.write(b"x" * 1000)
    raise OSError(errno.ENOSPC, "No space left on device")

write_atomically = checkpoints.write_atomically
checkpoints.write_atomically = lambda path, data: write_atomically(
    path, full_disk if path.name == "state-10.pkl" else data)
sys.argv = ["muzero", *sys.argv[1:]]
run()
"""


@pytest.mark.slow
def test_a_full_disk_stops_the_cli_with_one_line_and_the_last_checkpoint_loads(tmp_path):
    run_dir = tmp_path / "run"
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _FULL_DISK_AT_STEP_10,
            "train",
            "--backend",
            "local",
            "--config",
            TINY,
            "--logdir",
            str(run_dir),
            "--set",
            "train.training_steps=10",
            "--set",
            "train.checkpoint_interval=5",
        ],
        cwd=ROOT,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    # A checkpoint every 5 steps: 5 is written, 10 fails. Exit 1 (the run stopped), one line.
    directory = run_dir / "checkpoints"
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"muzero train: stopped: cannot write the checkpoint at training step 10: {directory / 'state-10.pkl'}: "
        f"No space left on device; the last complete checkpoint is {directory / 'ckpt-5'}"
    )
    assert _names(directory) == checkpoint_files(5)
    assert _checkpointer(run_dir)[0].restore()[0] == 5  # the run's own network and optimizer (configs/tiny.yaml)


# `muzero train ARGS` whose TensorBoard events cannot be flushed once the marker named by
# $FULL_DISK_AFTER exists (the first write to fail on a full disk, now and then).
_FULL_DISK_FOR_EVENTS = """
import os, sys
import tensorflow as tf
from tensorflow.python.ops import summary_ops_v2
from muzero.cli import run

flush = summary_ops_v2._ResourceSummaryWriter.flush

def full_disk(self):
    if os.path.exists(os.environ["FULL_DISK_AFTER"]):
        raise tf.errors.ResourceExhaustedError(None, None, "{{function_node F}} EVENTS; No space left on device")
    return flush(self)

summary_ops_v2._ResourceSummaryWriter.flush = summary_ops_v2._ResourceSummaryWriter.close = full_disk
sys.argv = ["muzero", *sys.argv[1:]]
run()
"""


@pytest.mark.slow
def test_a_full_disk_for_tensorboards_events_stops_the_cli_with_one_line(tmp_path):
    # Found by scripts/soak.py: the flush error of TensorBoard's writer was a traceback.
    run_dir = tmp_path / "run"
    directory = run_dir / "checkpoints"
    command = ["train", "--backend", "local", "--config", TINY, "--logdir", str(run_dir)]
    result = subprocess.run(
        [sys.executable, "-c", _FULL_DISK_FOR_EVENTS, *command, "--set", "train.checkpoint_interval=5"],
        cwd=ROOT,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", FULL_DISK_AFTER=str(directory / "ckpt-5.complete")),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    newest = complete_steps(directory)[0]
    assert result.stderr.strip().splitlines()[-1] == (
        f"muzero train: stopped: cannot write TensorBoard's events in {run_dir}: EVENTS; No space left on device; "
        f"last complete checkpoint {directory / f'ckpt-{newest}'}"
    )


def test_corrupted_newest_is_named_and_previous_used(tmp_path, caplog):
    checkpointer, _ = _checkpointer(tmp_path)
    checkpointer.save(10, {"step": 10})
    checkpointer.save(20, {"step": 20})
    data = next((tmp_path / "checkpoints").glob("ckpt-20.data-*"))
    data.write_bytes(data.read_bytes()[:16])  # truncated
    with caplog.at_level(logging.WARNING):
        step, state = _checkpointer(tmp_path)[0].restore()
    assert (step, state) == (10, {"step": 10})
    assert f"{data} is corrupted" in caplog.text
    # A corrupted state file is named the same way.
    (tmp_path / "checkpoints" / "state-10.pkl").write_bytes(b"\x80garbage")
    with caplog.at_level(logging.WARNING), pytest.raises(CheckpointError, match="no complete checkpoint could be"):
        _checkpointer(tmp_path)[0].restore()
    assert "state-10.pkl is corrupted" in caplog.text


def test_a_garbled_state_that_still_unpickles_is_caught_by_its_digest(tmp_path, caplog):
    # Found by scripts/soak.py: one garbled pickle in six still loads, into wrong numbers.
    # Here the garbled bytes are inside the array's data, so that the pickle loads.
    checkpointer, _ = _checkpointer(tmp_path)
    values = np.full(64, 2.0)
    checkpointer.save(10, {"step": 10, "values": values})
    checkpointer.save(20, {"step": 20, "values": values})
    directory = tmp_path / "checkpoints"
    state = directory / "state-20.pkl"
    data = bytearray(state.read_bytes())
    offset = bytes(data).index(values.tobytes()) + 8  # the array's second float
    data[offset : offset + 8] = np.float64(3.0).tobytes()
    state.write_bytes(bytes(data))
    assert checkpoints.load_pickle(state.open("rb"))["values"][1] == 3.0  # it unpickles, wrong
    # The marker lists each file's SHA-256 as sha256sum does.
    names = [line.split("  ")[1] for line in (directory / "ckpt-10.complete").read_text().splitlines()]
    assert names == ["state-10.pkl", "ckpt-10.index", "ckpt-10.data-00000-of-00001"]
    with caplog.at_level(logging.WARNING):
        step, state_dict = _checkpointer(tmp_path)[0].restore()
    assert step == 10 and state_dict["step"] == 10
    assert f"{state} is corrupted (its SHA-256 differs from the one in ckpt-20.complete)" in caplog.text
    # A checkpoint written before the markers held digests (an empty marker) is not checked.
    (directory / "ckpt-20.complete").write_bytes(b"")
    assert _checkpointer(tmp_path)[0].restore()[0] == 20


def test_non_finite_weights_are_never_written(tmp_path):
    checkpointer, network = _checkpointer(tmp_path)
    variable = network.trainable_variables[2]
    variable.assign(np.full(variable.shape, np.nan, np.float32))
    with pytest.raises(CheckpointError, match=f"non-finite values in {variable.path}"):
        checkpointer.save(10, {})
    assert complete_steps(tmp_path / "checkpoints") == []
    assert not list((tmp_path / "checkpoints").glob("*10*"))


def _nan_after(n: int):
    """Batch hook: the first n batches are clean, later ones carry a NaN observation."""
    calls = {"n": 0}

    def hook(batch):
        calls["n"] += 1
        if calls["n"] > n:
            observation = batch.observation.copy()
            observation[0, 0] = np.nan
            return batch._replace(observation=observation)
        return batch

    return hook


def _trainer(tmp_path: Path, *overrides: str, hook=None) -> Trainer:
    config = load_config(ROOT / "configs" / "tiny.yaml", list(overrides))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    return build_trainer(config, run_dir, EnvironmentSpec((4,), np.float32, 2, 1), batch_hook=hook)


def test_nonfinite_skip_leaves_weights_unchanged_and_stops_after_the_bound(tmp_path):
    trainer = _trainer(tmp_path, "train.nonfinite=skip", "train.max_consecutive_nonfinite=3", hook=_nan_after(12))
    with pytest.raises(RunStopped) as info:
        trainer.run()
    # 12 clean updates, then 3 NaN batches skipped: the step counter stays at 12.
    assert trainer.learner.training_step == 12 and trainer.state.counters["nonfinite_skips"] == 3
    assert str(info.value) == (
        "3 consecutive non-finite updates up to training step 13 "
        f"(train.max_consecutive_nonfinite); last good checkpoint: "
        f"{tmp_path / 'run' / 'checkpoints' / 'ckpt-10'}"
    )
    assert all(np.isfinite(v.numpy()).all() for v in trainer.network.trainable_variables)


def test_nonfinite_skip_changes_nothing(tmp_path):
    trainer = _trainer(tmp_path, hook=_nan_after(0))
    trainer.replay_buffer.save_game(_random_game(trainer))
    before = [v.numpy().copy() for v in trainer.learner.optimizer.variables]
    weights = [v.numpy().copy() for v in trainer.network.trainable_variables]
    batch = trainer.batch_hook(trainer.replay_buffer.sample_batch(3, 5))
    metrics = trainer.learner.train_step(batch)
    assert metrics["train/finite"] == 0.0 and not np.isfinite(metrics["loss/total"])
    # Weights, momentum slots and the iteration counter are untouched.
    for a, b in zip(weights, trainer.network.trainable_variables):
        np.testing.assert_array_equal(a, b.numpy())
    for a, b in zip(before, trainer.learner.optimizer.variables):
        np.testing.assert_array_equal(a, b.numpy())


def _random_game(trainer):
    from muzero.networks.base import make_uniform_network
    from muzero.selfplay import play_game

    config = load_config(ROOT / "configs" / "tiny.yaml")
    return play_game(config, make_uniform_network(2), trainer.source.environments[0], np.random.default_rng(0))


def test_nonfinite_stop_names_step_and_last_checkpoint(tmp_path):
    trainer = _trainer(tmp_path, "train.nonfinite=stop", hook=_nan_after(15))
    with pytest.raises(RunStopped) as info:
        trainer.run()
    assert str(info.value).startswith(
        "non-finite loss or gradient at training step 16 (loss/total=nan); "
        f"last good checkpoint: {tmp_path / 'run' / 'checkpoints' / 'ckpt-10'}"
    )


def test_the_back_end_is_recorded_once_a_session_has_a_checkpoint(tmp_path, monkeypatch):
    import errno

    import muzero.runner

    calls = []
    real = muzero.runner.record_backend
    monkeypatch.setattr(muzero.runner, "record_backend", lambda *args: calls.append(args) or real(*args))
    trainer = _trainer(tmp_path)  # configs/tiny.yaml: 20 steps, a checkpoint every 10
    trainer.run()
    # Checkpoints at 10 and 20, one record: after the first.
    assert calls == [(tmp_path / "run", "local")]
    assert (tmp_path / "run" / "backend.txt").read_text() == "local\n"

    def disk_full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(muzero.runner, "record_backend", disk_full)
    (tmp_path / "full").mkdir()
    trainer = _trainer(tmp_path / "full")
    with pytest.raises(RunStopped) as info:
        trainer.run()
    # The checkpoint at 10 is whole; the run stops there, naming it, as for the journal.
    run_dir = tmp_path / "full" / "run"
    assert trainer.learner.training_step == 10
    assert str(info.value) == (
        f"cannot write {run_dir / 'backend.txt'} (No space left on device); "
        f"last complete checkpoint {run_dir / 'checkpoints' / 'ckpt-10'}"
    )


# ----- checkpoints written before the package was split into envs/, networks/, search/ -----

LEGACY = Path(__file__).parent / "data" / "legacy_v1"


@pytest.mark.slow
def test_a_checkpoint_written_before_the_split_resumes(tmp_path):
    from tests.helpers import copy_run, muzero_command

    # tests/data/legacy_v1/README.md: 10 steps with batched self-play, games in progress; its
    # state-10.pkl names muzero.environment.Environment (now muzero.envs.gym.GymEnvironment).
    run_dir = copy_run(LEGACY / "cartpole_run", tmp_path / "run")
    result = muzero_command("train", "--resume", str(run_dir), "--set", "train.training_steps=14")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resumed from" in result.stderr and "ckpt-10 at training step 10 (2 games, 26 moves)" in result.stderr
    assert complete_steps(run_dir / "checkpoints")[0] == 14


def test_an_atari_environment_pickled_before_the_split_continues_exactly():
    import gzip
    import hashlib

    from muzero.checkpoints import load_pickle
    from muzero.envs.atari import AtariEnvironment, AtariSettings

    with gzip.open(LEGACY / "atari_env.pkl.gz", "rb") as f:
        env = load_pickle(f)  # pickled as muzero.atari.AtariEnvironment with a muzero.config.AtariConfig
    assert isinstance(env, AtariEnvironment) and env.settings == AtariSettings(noop_max=5)
    frames = b"".join(env.step(action)[0].tobytes() for action in (2, 2, 3))
    # The SHA-256 the old code computed for the same three frames (tests/data/legacy_v1/README.md).
    assert hashlib.sha256(frames).hexdigest() == "bdfe74585014245ce3cf6b0b729eee03ac63d23b8b2dfea18d7e0e59e121d835"
