"""Tests for muzero/memory.py (the run's memory estimated at start) and `replay.max_bytes`."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np

from muzero.config import GameConfig, MuZeroConfig, NetworkConfig, ReplayConfig, RunConfig, TrainConfig
from muzero.envs import EnvironmentSpec
from muzero.memory import GIB, PROCESS_BYTES, available_memory, estimate_memory, memory_problem, position_bytes
from muzero.replay.buffer import game_nbytes
from tests.helpers import ROOT, TINY
from tests.test_replay import line_game, replay_buffer

# CartPole: 4 float32, 2 actions, one player.
CARTPOLE = EnvironmentSpec((4,), np.float32, 2, 1)


def test_position_bytes_by_hand():
    # 16 bytes of observation + 4 x 32 (action, reward, root value, priority objects) + 56 (the
    # visit list) + 112 (the observation's array) + 40 (flat copy) + 2 x 40 per action = 432.
    assert position_bytes(CARTPOLE) == 16 + 128 + 56 + 112 + 40 + 80


def test_estimate_of_an_mlp_config_by_hand():
    config = MuZeroConfig(
        game=GameConfig(max_moves=100),
        network=NetworkConfig(hidden_state_size=8, hidden_layers=(16,), support_size=2),
        train=TrainConfig(batch_size=10, num_unroll_steps=2),
        replay=ReplayConfig(window_size=50),
    )
    estimate = estimate_memory(config, CARTPOLE, processes=2)
    # Replay: 50 games x 100 moves x 432 bytes.
    assert estimate.replay == 50 * 100 * 432
    # Batch: rows = 10 x 3 = 30; 4 bytes x (10 x 4 observation floats + 30 x (2 x 5 bins + 2
    # actions + 4) + 2 x 30 rows x 6 layers (2 x 1 hidden + 4) x 16 widest) = 4 x 6,280.
    assert estimate.batch == 4 * (40 + 30 * 16 + 2 * 30 * 6 * 16)
    # Network: 6 layers x 16 x 16 weights, x 3 (weights, momentum, gradients) x 4 bytes.
    assert estimate.network == 4 * 3 * 6 * 16 * 16
    # Adam keeps 2 slots (first and second moments) where SGD keeps the momentum: x 4.
    adam = dataclasses.replace(config, train=dataclasses.replace(config.train, optimizer="adam"))
    assert estimate_memory(adam, CARTPOLE, processes=2).network == 4 * 4 * 6 * 16 * 16
    assert estimate.total == estimate.replay + estimate.batch + estimate.network + 2 * PROCESS_BYTES
    # On Ray on this machine, its services too: half a GiB more.
    assert estimate_memory(config, CARTPOLE, processes=2, ray=True).total == estimate.total + GIB // 2


def test_value_prefix_counts_the_augmented_state_and_the_lstm():
    network = NetworkConfig(
        hidden_state_size=8, hidden_layers=(16,), support_size=2, value_prefix=True, lstm_hidden_size=4
    )
    config = MuZeroConfig(
        game=GameConfig(max_moves=100),
        network=network,
        train=TrainConfig(batch_size=10, num_unroll_steps=2),
        replay=ReplayConfig(window_size=50),
    )
    estimate = estimate_memory(config, CARTPOLE, processes=2)
    # The widest state: 16 + [h, c] (2 x 4) + prefix + count = 26 numbers per row; batch as in
    # the test above with 26 for 16 in the activations.
    assert estimate.batch == 4 * (40 + 30 * 16 + 2 * 30 * 6 * 26)
    # Network: 6 x 16 x 16, and the LSTM's 4 gates of 4 units over [26 inputs, 4 recurrent].
    assert estimate.network == 4 * 3 * (6 * 16 * 16 + 4 * 4 * (26 + 4))


def test_max_bytes_caps_the_replay_estimate():
    config = MuZeroConfig(replay=ReplayConfig(window_size=1_000_000, max_bytes=1000 * 40))
    # 1,000 moves as max_bytes counts them (16 observation + 8 x (3 + 2) = 56 bytes): 40,000 /
    # 56 x 432 = 308,571 bytes of objects.
    assert estimate_memory(config, CARTPOLE).replay == 40_000 * 432 // 56


def test_a_config_over_the_limit_is_one_line_naming_the_keys():
    config = MuZeroConfig(train=TrainConfig(batch_size=100_000_000), run=RunConfig(memory_limit=4.0))
    problem = memory_problem(config, CARTPOLE, available=None)
    assert problem.startswith("the run would need up to ") and "more than run.memory_limit (4.00 GiB)" in problem
    assert "train.batch_size" in problem and "replay.max_bytes" in problem
    # Without a limit of its own, the machine's available memory is the limit.
    assert "the machine's available memory (2.00 GiB)" in memory_problem(
        MuZeroConfig(train=TrainConfig(batch_size=100_000_000)), CARTPOLE, available=2 * GIB
    )
    assert memory_problem(MuZeroConfig(), CARTPOLE, available=None) is None  # nothing known: nothing refused


def test_available_memory_reads_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:   1000 kB\n")
    assert available_memory(meminfo) == 1000 * 1024
    assert available_memory(tmp_path / "missing") is None


def test_the_huge_batch_exits_2_before_tensorflow_and_writes_nothing(tmp_path):
    run_dir = tmp_path / "run"
    probe = (
        "import sys\n"
        "from muzero.cli import main, parse_flags\n"
        f"code = main(parse_flags(['muzero', 'train', '--config', {TINY!r}, '--logdir', {str(run_dir)!r},"
        " '--set', 'train.batch_size=100000000']))\n"
        "print(code, 'tensorflow' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], check=False, capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert result.stdout.split() == ["2", "False"], result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("muzero train: error: the run would need up to "), lines
    assert "train.batch_size" in lines[0] and "available memory" in lines[0]
    assert not run_dir.exists()


def test_replay_keeps_at_most_max_bytes_oldest_games_leaving_first():
    # line_game(3): 4 observations of 2 float32 (32 bytes) + 8 x (3 + 3 + 3) + 8 x 3 x 2 = 152.
    assert game_nbytes(line_game(3)) == 152
    buffer = replay_buffer(replay=ReplayConfig(window_size=10, max_bytes=400))
    for start in range(4):
        buffer.save_game(line_game(3, start=10.0 * start))
        # 2 games (304 bytes) fit in 400; a third (456) sends the oldest away.
        assert buffer.nbytes <= 400 and len(buffer) == min(start + 1, 2)
    assert [game.observations[0][0] for game in buffer.games] == [20.0, 30.0]
    # Sampling sees the same two games (the flat copy follows the window).
    assert set(buffer.sample_batch(1, 1).observation[:, 0]) <= {20.0, 21.0, 22.0, 30.0, 31.0, 32.0}
    buffer.save_game(line_game(3, start=40.0))
    assert [game.observations[0][0] for game in buffer.games] == [30.0, 40.0] and buffer.nbytes == 304
    # A game larger than the bound alone stays: the newest is never dropped.
    buffer.save_game(line_game(10, start=50.0))
    assert len(buffer) == 1 and buffer.nbytes == game_nbytes(line_game(10))
