"""Fault injection through the real command: SIGKILL, SIGTERM, corruption, exact resume."""

from __future__ import annotations

import os
import pickle
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from muzero.config_loader import load_config
from muzero.run_dir import complete_steps
from tests.helpers import ATARI_TINY, TICTACTOE, TINY, TINY_RUN_SETTINGS, checkpoint_files, copy_run

pytestmark = pytest.mark.slow


def _command(*args: str, name_backend: bool = True) -> list[str]:
    """`muzero ARGS`; train runs the bit-reproducible interleaved loop unless a back end is named
    (or `name_backend` is False: the flags as given)."""
    if name_backend and args[0] == "train" and "--backend" not in args:
        args = (*args, "--backend", "local")
    return [sys.executable, "-m", "muzero.cli", *args]


def _env() -> dict:
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")


def _run(*args: str, name_backend: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        _command(*args, name_backend=name_backend),
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _start(log: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        _command(*args), env=_env(), stdout=log.open("w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    )


def _wait_for_step(checkpoints: Path, step: int, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if complete_steps(checkpoints) and complete_steps(checkpoints)[0] >= step:
            return
        assert process.poll() is None, "training exited early"
        time.sleep(0.05)
    raise AssertionError(f"no checkpoint >= {step} within {timeout}s")


def _resumed_step(log: Path) -> int:
    match = re.search(r"resumed from .*ckpt-(\d+) at training step (\d+)", log.read_text())
    assert match, log.read_text()[-2000:]
    assert match.group(1) == match.group(2)
    return int(match.group(2))


def test_sigkill_at_random_moments_then_resume(tmp_path):
    run_dir, checkpoints = tmp_path / "run", tmp_path / "run" / "checkpoints"
    # A checkpoint every 2 steps makes kills during a save likely.
    settings = ["--set", "train.training_steps=100000", "--set", "train.checkpoint_interval=2"]
    process = _start(tmp_path / "log0", "train", "--config", TINY, "--logdir", str(run_dir), *settings)
    _wait_for_step(checkpoints, 2, process)
    rng = random.Random(0)
    newest_seen = 0
    for cycle in range(2):
        time.sleep(rng.uniform(0.0, 1.5))
        process.send_signal(signal.SIGKILL)
        process.wait()
        newest = complete_steps(checkpoints)[0]
        assert newest >= newest_seen  # the step counter never goes back past a complete checkpoint
        newest_seen = newest
        log = tmp_path / f"log{cycle + 1}"
        process = _start(log, "train", "--resume", str(run_dir), *settings)
        _wait_for_step(checkpoints, newest + 2, process)  # training goes on past it
        assert _resumed_step(log) == newest
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=120) == 0
    # Whatever was killed mid-save is gone; every marker has its files.
    names = {p.name for p in checkpoints.iterdir()}
    assert not [n for n in names if n.endswith(".tmp")]
    for marker in checkpoints.glob("ckpt-*.complete"):
        step = int(marker.name.split("-")[1].split(".")[0])
        assert {f"ckpt-{step}.index", f"state-{step}.pkl"} <= names


def _final_state(run_dir: Path) -> tuple[dict, dict]:
    import tensorflow as tf

    step = complete_steps(run_dir / "checkpoints")[0]
    reader = tf.train.load_checkpoint(str(run_dir / "checkpoints" / f"ckpt-{step}"))
    tensors = {
        name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map() if "save_counter" not in name
    }
    state = pickle.loads((run_dir / "checkpoints" / f"state-{step}.pkl").read_bytes())
    return tensors, state


def _games(state: dict) -> list:
    # The checkpoint's games carry their positions' replay priorities.
    return [
        (g.history, g.rewards, g.root_values, g.child_visits, np.asarray(g.observations), g.priorities, g.players)
        for g in state["replay"]["games"]
    ]


@pytest.mark.parametrize(
    "config, k, m, interval, selfplay, shared",
    [
        # The straight run is the session's shared tiny run (30 steps, a checkpoint every 5).
        (TINY, 15, 15, 5, [], "tiny_run"),
        # Games in progress handed to replay in segments of 2 moves (selfplay.segment_length): the
        # moves already handed back of each game in progress are in the checkpoint too.
        (
            TINY,
            20,
            20,
            5,
            ["--set", "selfplay.batched=true", "--set", "selfplay.num_envs=3", "--set", "selfplay.segment_length=2"],
            None,
        ),
        # ALE emulator states of the games in progress are in the checkpoint too, and prioritized
        # replay's priorities (configs/atari/tiny.yaml: replay.priority_alpha 1). Straight: the
        # shared Atari run.
        (ATARI_TINY, 3, 3, 3, [], "atari_tiny_run"),
        # OpenSpiel states of the board games in progress (pickled as their moves), two-player targets.
        (
            TICTACTOE,
            10,
            10,
            5,
            [
                "--set",
                "search.num_simulations=4",
                "--set",
                "selfplay.num_envs=4",
                "--set",
                "selfplay.search=numpy",
                "--set",
                "replay.min_games=4",
                "--set",
                "train.batch_size=16",
                "--set",
                "run.eval_interval=0",
                "--set",
                "run.eval_opponents=[]",
            ],
            None,
        ),
        # Reanalyse: reanalysed statistics in replay, the target network (refreshed every 3 steps,
        # not at checkpoints) and the reanalyse budget carried over.
        (
            TINY,
            10,
            10,
            5,
            [
                "--set",
                "reanalyse.fraction=0.8",
                "--set",
                "reanalyse.positions_per_step=4",
                "--set",
                "reanalyse.batch_size=8",
                "--set",
                "reanalyse.target_network_interval=3",
            ],
            None,
        ),
    ],
    ids=[
        "one_game",
        "batched_games_in_progress_in_segments",
        "atari_games_in_progress",
        "board_games_in_progress",
        "reanalyse",
    ],
)
def test_exact_resume_equals_straight_run(tmp_path, request, config, k, m, interval, selfplay, shared):
    interrupted = tmp_path / "interrupted"
    settings = ["--set", f"train.training_steps={k + m}", "--set", f"train.checkpoint_interval={interval}", *selfplay]
    if shared is None:
        straight = tmp_path / "straight"
        assert _run("train", "--config", config, "--logdir", str(straight), *settings).returncode == 0
    else:
        straight = request.getfixturevalue(shared)
        saved = load_config(straight / "config.yaml").train
        assert (saved.training_steps, saved.checkpoint_interval) == (k + m, interval)

    process = _start(tmp_path / "log", "train", "--config", config, "--logdir", str(interrupted), *settings)
    _wait_for_step(interrupted / "checkpoints", k, process)
    process.send_signal(signal.SIGKILL)
    process.wait()
    result = _run("train", "--resume", str(interrupted))
    assert result.returncode == 0, result.stderr[-2000:]

    tensors_a, state_a = _final_state(straight)
    tensors_b, state_b = _final_state(interrupted)
    # Weights, optimizer slots (momentum) and the step counter (optimizer iterations).
    assert tensors_a.keys() == tensors_b.keys()
    # Keras keeps the momentum slots in optimizer/_variables/N and the step in _iterations.
    assert any(name.startswith("optimizer/_variables/") for name in tensors_a)
    assert tensors_a["optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"] == k + m
    for name in tensors_a:
        np.testing.assert_array_equal(tensors_a[name], tensors_b[name], err_msg=name)
    # Replay contents, counters (but wall-clock time) and RNG states.
    for a, b in zip(_games(state_a), _games(state_b), strict=True):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    for count in ("games_saved", "episodes_saved"):
        assert state_a["replay"][count] == state_b["replay"][count]
    if "selfplay.segment_length=2" in selfplay:  # segments were stored, and games
        games = state_a["replay"]["games"]
        assert any(game.partial for game in games) and state_a["replay"]["episodes_saved"] > 0
    # Reanalyse's statistics stored on the games, its target network and budget.
    reanalysis = [(a.reanalysis, b.reanalysis) for a, b in zip(state_a["replay"]["games"], state_b["replay"]["games"])]
    for a, b in reanalysis:
        assert (a is None) == (b is None)
        for x, y in zip(a or (), b or ()):
            np.testing.assert_array_equal(x, y)
    assert ("reanalyse" in state_a) == ("reanalyse" in state_b) == ("reanalyse.fraction=0.8" in selfplay)
    if "reanalyse" in state_a:
        assert any(a is not None for a, _ in reanalysis)
        target_a, target_b = state_a["reanalyse"]["target_network"], state_b["reanalyse"]["target_network"]
        assert target_a["step"] == target_b["step"] == 18  # the last multiple of 3 up to 20
        for name in target_a["weights"]:
            for layer in target_a["weights"][name]:
                for x, y in zip(target_a["weights"][name][layer], target_b["weights"][name][layer]):
                    np.testing.assert_array_equal(x, y)
        assert state_a["reanalyse"]["worker"] == state_b["reanalyse"]["worker"]
    state_a["counters"].pop("wall_seconds"), state_b["counters"].pop("wall_seconds")
    assert state_a["counters"] == state_b["counters"] and state_a["rng"] == state_b["rng"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_sigterm_and_ctrl_c_write_a_final_checkpoint_and_exit_0(tmp_path, signum):
    run_dir = tmp_path / "run"
    process = _start(
        tmp_path / "log",
        "train",
        "--config",
        TINY,
        "--logdir",
        str(run_dir),
        "--set",
        "train.training_steps=100000",
        "--set",
        "train.checkpoint_interval=1000",
    )
    log = tmp_path / "log"
    deadline = time.time() + 120
    while "step " not in log.read_text() and time.time() < deadline:  # training has started
        time.sleep(0.1)
    process.send_signal(signum)
    assert process.wait(timeout=120) == 0
    name = signal.Signals(signum).name
    match = re.search(rf"stopped by {name} at training step (\d+) with a final checkpoint", log.read_text())
    assert match, log.read_text()[-2000:]
    assert complete_steps(run_dir / "checkpoints")[0] == int(match.group(1)) > 0


def test_corrupted_newest_checkpoint_falls_back_via_cli(tmp_path, tiny_run):
    run_dir = copy_run(tiny_run, tmp_path / "run")  # checkpoints at 20, 25, 30
    data = next((run_dir / "checkpoints").glob("ckpt-30.data-*"))
    data.write_bytes(b"\0" * 8)
    result = _run("train", "--resume", str(run_dir), "--set", "train.training_steps=35")
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"{data} is corrupted" in result.stderr
    assert re.search(r"resumed from .*ckpt-25 at training step 25", result.stderr)
    # The corrupted 30 is set aside, not overwritten; the run wrote a new 30, then 35.
    (set_aside,) = (run_dir / "checkpoints").glob("set-aside-*")
    assert complete_steps(set_aside) == [30] and complete_steps(run_dir / "checkpoints") == [35, 30, 25]


def test_a_garbled_checkpoint_file_changes_nothing(tmp_path, tiny_run):
    run_dir = copy_run(tiny_run, tmp_path / "run")  # checkpoints at 20, 25, 30
    (run_dir / "checkpoints" / "checkpoint").write_text("garbage {{{ not a CheckpointState")
    result = _run("train", "--resume", str(run_dir), "--set", "train.training_steps=40")
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.search(r"resumed from .*ckpt-30 at training step 30", result.stderr)
    # Saved at 35 and 40. By the markers, the newest three (run.max_checkpoints) are 40, 35, 30,
    # each whole; 20 and 25 are gone whole (no .data/.index orphans); the index is rewritten.
    assert {p.name for p in (run_dir / "checkpoints").iterdir()} == checkpoint_files(30, 35, 40)
    assert 'model_checkpoint_path: "ckpt-40"' in (run_dir / "checkpoints" / "checkpoint").read_text()


def test_resume_from_a_chosen_step_sets_the_newer_checkpoints_aside(tmp_path, tiny_run):
    run_dir = copy_run(tiny_run, tmp_path / "run")  # checkpoints at 20, 25, 30
    result = _run("train", "--resume", str(run_dir), "--step", "7")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"muzero train: error: --step 7: no complete checkpoint at that step in "
        f"{run_dir / 'checkpoints'} (complete: 20, 25, 30)"
    )
    result = _run("train", "--resume", str(run_dir), "--step", "20", "--set", "train.training_steps=25")
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.search(r"resumed from .*ckpt-20 at training step 20", result.stderr)
    (set_aside,) = (run_dir / "checkpoints").glob("set-aside-*")
    assert f"the checkpoints after training step 20 are set aside in {set_aside}" in result.stderr
    # 25 and 30 of the first history, whole, where no resume looks; 20 and the new 25 in use.
    assert complete_steps(set_aside) == [30, 25] and complete_steps(run_dir / "checkpoints") == [25, 20]


def test_resume_input_errors(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(Path(TINY).read_text())
    result = _run("train", "--resume", str(run_dir))
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == f"muzero train: error: {run_dir / 'checkpoints'}: no complete checkpoint to resume from"
    )
    result = _run("train", "--resume", str(run_dir), "--logdir", str(tmp_path / "x"))
    assert result.returncode == 2 and "give one" in result.stderr
    result = _run("train", "--resume", str(tmp_path / "missing"))
    assert result.returncode == 2 and "not a run directory" in result.stderr


def test_resume_refuses_a_new_network_shape_and_prints_other_changes(tmp_path, tiny_run):
    run_dir = copy_run(tiny_run, tmp_path / "run")
    result = _run("train", "--resume", str(run_dir), "--set", "network.hidden_state_size=5")
    assert result.returncode == 2
    # hidden state 4 -> 5: representation/state kernel (8, 4) -> (8, 5), dynamics input 4 + 2 -> 5 + 2, ...
    assert "cannot resume with a different network shape: " in result.stderr
    assert "representation/state/kernel (8, 4) -> (8, 5)" in result.stderr
    assert "dynamics/hidden_0/kernel (6, 8) -> (7, 8)" in result.stderr
    # A new optimizer is refused too: the checkpoints hold SGD's momentum slots, not Adam's moments.
    result = _run("train", "--resume", str(run_dir), "--set", "train.optimizer=adam")
    assert result.returncode == 2
    assert result.stderr.strip().endswith(
        "cannot resume with train.optimizer 'adam': its checkpoints hold 'sgd''s slots (start a new run)"
    )
    result = _run("train", "--resume", str(run_dir), "--set", "train.training_steps=35", "--set", "train.lr_init=0.02")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "config changed on resume: train.lr_init: 0.01 -> 0.02" in result.stderr
    assert "config changed on resume: train.training_steps: 30 -> 35" in result.stderr


def test_resume_without_backend_continues_on_the_runs_own(tmp_path, tiny_run):
    # tiny_run trained with --backend local (tests.helpers.muzero_command names it); resumed
    # with no --backend, auto must not become Ray on this 2-core machine: the run says why.
    run_dir = copy_run(tiny_run, tmp_path / "run")
    assert (run_dir / "backend.txt").read_text() == "local\n"
    result = _run("train", "--resume", str(run_dir), "--set", "train.training_steps=35", name_backend=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"back end: local (the run's own, {run_dir / 'backend.txt'}; --backend to change)" in result.stderr
    assert "self-play actors up" not in result.stderr  # no Ray actor pool was started
    assert _resumed_step(run_dir / "log.txt") == 30


def _loss_scalars(run_dir: Path) -> list[tuple[int, str, float]]:
    import tensorflow as tf

    out = []
    for path in sorted(run_dir.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if value.tag.startswith(("loss/", "selfplay/episode_return")):
                    out.append((event.step, value.tag, float(tf.make_ndarray(value.tensor))))
    return out


def test_same_seed_same_numbers_different_seed_different(tmp_path, tiny_run):
    runs = {"a": _loss_scalars(tiny_run)}  # seed 0
    for name, seed in (("b", 0), ("c", 1)):
        result = _run(
            "train", "--config", TINY, "--logdir", str(tmp_path / name), "--set", f"run.seed={seed}", *TINY_RUN_SETTINGS
        )
        assert result.returncode == 0
        runs[name] = _loss_scalars(tmp_path / name)
    assert len(runs["a"]) > 20
    assert runs["a"] == runs["b"]
    assert runs["a"] != runs["c"]


def test_resumed_tensorboard_run_has_each_step_once(tmp_path):
    run_dir = tmp_path / "run"
    settings = ["--set", "train.training_steps=100000", "--set", "train.checkpoint_interval=10"]
    process = _start(tmp_path / "log", "train", "--config", TINY, "--logdir", str(run_dir), *settings)
    _wait_for_step(run_dir / "checkpoints", 30, process)
    time.sleep(1.0)  # log some steps past the checkpoint, then crash
    process.send_signal(signal.SIGKILL)
    process.wait()
    resumed_from = complete_steps(run_dir / "checkpoints")[0]
    result = _run("train", "--resume", str(run_dir), "--set", f"train.training_steps={resumed_from + 20}")
    assert result.returncode == 0, result.stderr[-2000:]
    steps = [step for step, tag, _ in _loss_scalars(run_dir) if tag == "loss/total"]
    assert len(steps) == len(set(steps)), "a training step was logged twice"
    assert max(steps) == resumed_from + 20
