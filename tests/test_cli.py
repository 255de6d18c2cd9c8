"""End-to-end tests of the `muzero` command (subprocesses, as a user runs it)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import ATARI_TINY, TICTACTOE, TINY
from tests.helpers import muzero_command as muzero


def _event_tags(run_dir: Path) -> set[str]:
    import tensorflow as tf

    tags = set()
    for event_file in run_dir.glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(event_file)):
            tags.update(value.tag for value in event.summary.value)
    return tags


def _event_steps(run_dir: Path, tag: str) -> list[int]:
    import tensorflow as tf

    steps = []
    for event_file in run_dir.glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(event_file)):
            steps.extend(event.step for value in event.summary.value if value.tag == tag)
    return sorted(steps)


@pytest.mark.slow
def test_train_tiny_then_evaluate(tiny_run):
    # The shared run: `muzero train --config configs/tiny.yaml` for 30 steps (conftest.py).
    run_dir = tiny_run
    stderr = (run_dir / "train.stderr").read_text()
    assert "step " in stderr and "moves/s" in stderr  # progress line
    tags = _event_tags(run_dir)
    expected = {
        "loss/total",
        "loss/value",
        "loss/reward",
        "loss/policy",
        "loss/l2",
        "loss/step_0",
        "loss/step_3",
        "train/lr",
        "train/steps_per_sec",
        "selfplay/episode_return",
        "selfplay/episode_length",
        "selfplay/moves_per_sec",
        "replay/games",
        "mcts/root_value",
        "config",
        "grad/hidden_state_step_0",
        "grad/hidden_state_step_3",
        "grad/global_norm",
    }
    assert expected <= tags, expected - tags
    # Training-step summaries at multiples of SUMMARY_EVERY (10: 10, 20, 30), at the
    # gradient-norm steps (run.grad_summary_interval 5: 5, 10, ..., 30) and at the last step
    # (30); not after every catch-up of the learner (steps_per_move 0.5, a game at a time).
    assert _event_steps(run_dir, "loss/total") == [5, 10, 15, 20, 25, 30]
    # The final checkpoint is at step 30; interval 5 with 3 kept: 20, 25, 30.
    assert (run_dir / "checkpoints" / "ckpt-30.index").is_file()
    assert "training_steps: 30" in (run_dir / "config.yaml").read_text()

    result = muzero("evaluate", "--run", str(run_dir), "--episodes", "3")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "over 3 greedy episodes (checkpoint at training step 30)" in result.stdout
    # An older kept checkpoint by its step (20, 25 and 30 are complete), and one that is not.
    result = muzero("evaluate", "--run", str(run_dir), "--episodes", "2", "--step", "20")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "over 2 greedy episodes (checkpoint at training step 20)" in result.stdout
    videos = run_dir.parent / "videos"  # refused before anything is written: no folder for the videos
    result = muzero("evaluate", "--run", str(run_dir), "--step", "7", "--video", str(videos))
    checkpoints = run_dir / "checkpoints"
    _assert_usage_error(
        result, f"--step 7: no complete checkpoint at that step in {checkpoints} (complete: 20, 25, 30)"
    )
    assert not videos.exists()


def _assert_usage_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "text, fragments",
    [
        ("train:\n  batch_sise: 8\n", ["train.batch_sise: unknown key (did you mean 'batch_size'?)"]),
        ("train:\n  batch_size: eight\n", ["train.batch_size: expected an integer"]),
        ("game:\n  discount: 2\n", ["game.discount: expected a value <= 1.0, got 2"]),
        ("game: [\n", ["malformed YAML"]),
        # Not text: a PNG's signature starts with byte 0x89, which UTF-8 never starts a character with.
        (b"\x89PNG\r\n\x1a\n\x00\x00", ["not UTF-8 text (byte 0x89 at offset 0); expected a YAML file"]),
        # Nothing, or only comments: refused, not trained on the built-in defaults.
        ("", ["empty config (no sections); to train on the built-in defaults, say so: --config defaults"]),
        ("# train:\n#   batch_size: 8\n", ["empty config (no sections)"]),
    ],
    ids=["unknown_key", "wrong_type", "out_of_range", "malformed", "binary", "empty", "only_comments"],
)
def test_bad_yaml_exits_2_and_writes_nothing(tmp_path, text, fragments):
    config = tmp_path / "bad.yaml"
    config.write_bytes(text if isinstance(text, bytes) else text.encode())
    result = muzero("train", "--config", str(config), "--logdir", str(tmp_path / "run"))
    _assert_usage_error(result, str(config), *fragments)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("train.batch_sise=8", "unknown key (did you mean 'batch_size'?)"),
        ("train.batch_size=eight", "expected an integer"),
        ("search.num_simulations=0", "expected a value >= 1, got 0"),
        # A section that only the --set names: the --set is to blame, not configs/tiny.yaml.
        ("nosuch.x=3", "nosuch: unknown key"),
    ],
)
def test_bad_set_exits_2(tmp_path, override, fragment):
    result = muzero("train", "--config", TINY, "--set", override, "--logdir", str(tmp_path / "run"))
    _assert_usage_error(result, f"muzero train: error: --set {override}: ", fragment)
    assert not (tmp_path / "run").exists()


def test_bad_environment_and_run_directories(tmp_path):
    result = muzero("train", "--config", TINY, "--set", "game.id=NoSuchGame-v0", "--logdir", str(tmp_path / "r"))
    _assert_usage_error(result, "game.id", "NoSuchGame-v0")
    result = muzero("train", "--config", TINY, "--set", "game.action_space_size=3", "--logdir", str(tmp_path / "r"))
    _assert_usage_error(result, "CartPole-v1 has 2 actions, but game.action_space_size is 3")
    result = muzero(
        "train",
        "--config",
        TINY,
        "--set",
        "game.stacked_frames=4",
        "--set",
        "network.kind=resnet",
        "--set",
        "selfplay.batched=true",
        "--set",
        "selfplay.search=compiled",
        "--logdir",
        str(tmp_path / "r"),
    )
    _assert_usage_error(result, "game.stacked_frames: stacking frames needs image observations", "shape (4,)")
    # Gumbel's completed Q needs the negamax rule with two players (tic-tac-toe); with one it is a no-op.
    two_players = ["--set", "search.algorithm=gumbel", "--set", "search.two_player_rule=pseudocode"]
    result = muzero("train", "--config", TICTACTOE, *two_players, "--logdir", str(tmp_path / "r"))
    _assert_usage_error(result, "search.two_player_rule: ", "has two players: Gumbel MuZero needs")
    assert not (tmp_path / "r").exists()
    result = muzero("train", "--config", TINY, *two_players, "--print-config")  # CartPole: one player
    assert result.returncode == 0, result.stderr
    result = muzero(
        "train", "--config", ATARI_TINY, "--set", "game.action_space_size=6", "--logdir", str(tmp_path / "r")
    )
    _assert_usage_error(result, "ALE/Pong-v5 has 18 actions, but game.action_space_size is 6")
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = muzero("train", "--config", TINY, "--logdir", str(blocker / "run"))
    _assert_usage_error(result, str(blocker / "run"), "cannot write run directory")
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "keep.txt").write_text("precious")
    result = muzero("train", "--config", TINY, "--logdir", str(occupied))
    _assert_usage_error(result, "already holds files")
    assert (occupied / "keep.txt").read_text() == "precious"


def test_evaluate_errors(tmp_path):
    _assert_usage_error(muzero("evaluate", "--run", str(tmp_path / "nope")), "not a run directory")
    result = muzero("evaluate", "--run", str(tmp_path), "--episodes", "0")
    _assert_usage_error(result, "--episodes: expected an integer >= 1")


def test_a_garbled_run_config_exits_2(tmp_path):
    # A run directory with a complete checkpoint (as far as file names go) and a config.yaml of bytes.
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    for name in ("ckpt-5.complete", "ckpt-5.index", "ckpt-5.data-00000-of-00001", "state-5.pkl"):
        (run_dir / "checkpoints" / name).write_bytes(b"")
    (run_dir / "config.yaml").write_bytes(b"game:\n  id: \xff\xfe\n")
    # Byte 0xff at offset 12 ("game:\n  id: " is 12 bytes).
    fragment = f"{run_dir / 'config.yaml'}: not UTF-8 text (byte 0xff at offset 12)"
    _assert_usage_error(muzero("evaluate", "--run", str(run_dir)), "muzero evaluate: error: " + fragment)
    _assert_usage_error(muzero("train", "--resume", str(run_dir)), "muzero train: error: " + fragment)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_start_up_is_one_line_and_the_shells_status(tmp_path, signum):
    run_dir = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "muzero.cli", "train", "--config", TINY, "--logdir", str(run_dir), "--backend", "local"],
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # The lock file appears once the input is checked, just before TensorFlow loads (seconds).
    deadline = time.time() + 60
    while not (run_dir / "lock").exists():
        assert process.poll() is None and time.time() < deadline, process.communicate()
        time.sleep(0.01)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=60)
    # 128 + the signal's number: 130 for SIGINT (2), 143 for SIGTERM (15).
    assert process.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert stderr.strip().splitlines()[-1] == f"muzero train: stopped by {signal.Signals(signum).name} during start-up"


def test_input_errors_are_reported_before_tensorflow_is_imported(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  batch_sise: 8\n")
    probe = (
        "import sys\n"
        "from muzero.cli import main, parse_flags\n"
        f"code = main(parse_flags(['muzero', 'train', '--config', {str(bad)!r}]))\n"
        f"code2 = main(parse_flags(['muzero', 'train', '--resume', {str(tmp_path)!r}]))\n"
        "print(code, code2, 'tensorflow' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=120)
    assert result.stdout.split() == ["2", "2", "False"], result.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("search", ["numpy", "compiled"])
def test_train_tiny_batched_selfplay_and_xla_learner(tmp_path, search):
    run_dir = tmp_path / "run"
    result = muzero(
        "train",
        "--config",
        TINY,
        "--logdir",
        str(run_dir),
        "--set",
        "selfplay.batched=true",
        "--set",
        "selfplay.num_envs=3",
        "--set",
        f"selfplay.search={search}",
        "--set",
        "train.jit_compile=true",
        "--set",
        "train.training_steps=20",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (run_dir / "checkpoints" / "ckpt-20.complete").is_file()
    # Self-play rounds of 3 games: games saved come in multiples of 3.
    assert "selfplay/episode_return" in _event_tags(run_dir)


@pytest.mark.slow
def test_train_tiny_with_gumbel_muzero(tmp_path):
    # The compiled search (every shipped config's); the numpy searcher's Gumbel path is the
    # reference's, played in tests/test_selfplay.py.
    run_dir = tmp_path / "run"
    result = muzero(
        "train",
        "--config",
        TINY,
        "--logdir",
        str(run_dir),
        "--set",
        "search.algorithm=gumbel",
        "--set",
        "search.num_simulations=3",
        "--set",
        "selfplay.batched=true",
        "--set",
        "selfplay.num_envs=2",
        "--set",
        "selfplay.search=compiled",
        "--set",
        "run.eval_interval=10",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (run_dir / "checkpoints" / "ckpt-20.complete").is_file()
    # Self-play after the first publication ran the search on the published network, and
    # greedy evaluation (no Gumbel noise) played.
    tags = _event_tags(run_dir)
    assert "selfplay/episode_return" in tags and "eval/mean_return" in tags


@pytest.mark.slow
def test_train_tiny_atari_then_evaluate(atari_tiny_run):
    # The whole Atari path on the CPU: ALE Pong, 32 stacked frames, the resnet, 601-bin supports.
    # The shared run: `muzero train --config configs/atari/tiny.yaml` (conftest.py).
    run_dir = atari_tiny_run
    assert (run_dir / "checkpoints" / "ckpt-6.complete").is_file()
    tags = _event_tags(run_dir)
    assert {"loss/total", "loss/value", "selfplay/episode_return", "replay/games"} <= tags
    # The run ends at train.training_steps (6) with its final checkpoint.
    assert "done: 6 training steps" in (run_dir / "train.stderr").read_text()

    result = muzero("evaluate", "--run", str(run_dir), "--episodes", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "over 2 greedy episodes (checkpoint at training step 6)" in result.stdout


@pytest.mark.slow
def test_tiny_run_writes_hparams_eval_length_env_step_returns_and_log(tiny_run):
    # The shared run (conftest.py): configs/tiny.yaml with --set train.training_steps=30; it ends with a
    # greedy evaluation of run.eval_episodes = 2 episodes at step 30.
    import tensorflow as tf
    from tensorboard.plugins.hparams import metadata as hparams_metadata

    events = [
        event
        for path in tiny_run.glob("events.out.tfevents.*")
        for event in tf.compat.v1.train.summary_iterator(str(path))
    ]
    values = [(event.step, value) for event in events for value in event.summary.value]
    (hparams,) = [value for _, value in values if value.tag == hparams_metadata.SESSION_START_INFO_TAG]
    info = hparams_metadata.parse_session_start_info_plugin_data(hparams.metadata.plugin_data.content)
    assert info.hparams["train.training_steps"].number_value == 30  # the --set
    assert info.hparams["train.batch_size"].number_value == 8  # configs/tiny.yaml
    assert info.hparams["game.id"].string_value == "CartPole-v1"
    lengths = [(step, tf.make_ndarray(value.tensor)) for step, value in values if value.tag == "eval/episode_length"]
    # One evaluation, at the last step; a CartPole game of tiny.yaml lasts 1 to game.max_moves = 50 moves.
    assert [step for step, _ in lengths] == [30] and 1 <= lengths[0][1] <= 50
    # Returns against environment steps: each at the moves played so far, which selfplay/env_steps also logs.
    env_steps = {float(tf.make_ndarray(value.tensor)) for _, value in values if value.tag == "selfplay/env_steps"}
    by_env_step = {step for step, value in values if value.tag == "selfplay/episode_return_by_env_step"}
    assert by_env_step and {float(step) for step in by_env_step} <= env_steps
    tags = {value.tag for _, value in values}
    assert {
        "eval/mean_return_by_env_step",
        "replay/positions",
        "replay/bytes",
        "mcts/root_visit_entropy",
        "values/predicted",
        "values/target",
        "values/error",
    } <= tags
    log = (tiny_run / "log.txt").read_text()
    assert "compiling the training step" in log and "evaluating: 2 greedy episodes at training step 30" in log
    assert "done: 30 training steps" in log
    stderr = (tiny_run / "train.stderr").read_text()
    assert re.search(r"\bnan\b", stderr) is None, stderr  # "-" for what is not known yet
    if not Path("/proc/driver/nvidia").exists():  # TensorFlow's CUDA probing is not shown without a driver
        assert "cudart_stub" not in stderr and "cuInit" not in stderr


@pytest.mark.slow
def test_run_with_the_consistency_loss_logs_it_and_its_value_histograms(tmp_path):
    import tensorflow as tf

    # A batch of 300 rows, more than the 256 that value histograms keep: every field of the
    # kept rows, the unroll observations too, must be cut alike (the last step writes them).
    settings = ["train.consistency_loss_weight=1.0", "train.batch_size=300", "train.training_steps=4"]
    result = muzero(
        "train", "--config", TINY, "--logdir", str(tmp_path / "run"), *(a for s in settings for a in ("--set", s))
    )
    assert result.returncode == 0, result.stderr[-3000:]
    values = [
        (event.step, value)
        for path in (tmp_path / "run").glob("events.out.tfevents.*")
        for event in tf.compat.v1.train.summary_iterator(str(path))
        for value in event.summary.value
    ]
    consistency = [float(tf.make_ndarray(v.tensor)) for _, v in values if v.tag == "loss/consistency"]
    # Summed over the K = 3 recurrent steps of configs/tiny.yaml, each 1 - cosine in [0, 2].
    assert consistency and all(0.0 <= c <= 6.0 for c in consistency)
    assert {step for step, v in values if v.tag == "values/predicted"} == {4}


def test_print_config_merges_files_from_another_folder_and_writes_nothing(tmp_path):
    (tmp_path / "fast.yaml").write_text("train:\n  batch_size: 4\n  td_steps: 2\ngame:\n  action_space_size: null\n")
    result = muzero(
        "train",
        "--config",
        "configs/tiny.yaml",
        "--config",
        "fast.yaml",
        "--set",
        "train.batch_size=16",
        "--logdir",
        str(tmp_path / "run"),
        "--print-config",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    import yaml

    printed = yaml.safe_load(result.stdout)
    # configs/tiny.yaml (found in the source tree, not under tmp_path) says batch_size 8, td_steps 5,
    # num_unroll_steps 3; fast.yaml: 4 and 2; the --set: 16. action_space_size null: CartPole's 2.
    assert printed["train"]["batch_size"] == 16
    assert printed["train"]["td_steps"] == 2
    assert printed["train"]["num_unroll_steps"] == 3
    assert printed["game"]["action_space_size"] == 2
    assert sorted(path.name for path in tmp_path.iterdir()) == ["fast.yaml"]  # no run folder, no runs/


def test_bad_kwargs_and_action_count_exit_2_and_write_nothing(tmp_path):
    run_dir = tmp_path / "run"
    result = muzero("train", "--config", TINY, "--set", "game.kwargs.no_such_argument=1", "--logdir", str(run_dir))
    _assert_usage_error(result, "--set game.kwargs.no_such_argument=1: game.kwargs: CartPole-v1: ", "no_such_argument")
    result = muzero("train", "--config", TINY, "--set", "game.action_space_size=4", "--print-config")
    _assert_usage_error(
        result,
        "--set game.action_space_size=4: game.action_space_size: "
        "CartPole-v1 has 2 actions, but game.action_space_size is 4",
    )
    assert result.stdout == ""
    assert not run_dir.exists()
