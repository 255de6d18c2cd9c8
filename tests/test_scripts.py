"""The scripts run (tiny settings), so they do not rot."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests.helpers import load_script, tictactoe_after

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gradient_scaling_demo_writes_csv_and_png(tmp_path):
    out = tmp_path / "demo"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "gradient_scaling_demo.py"),
            "--out",
            str(out),
            "--seeds",
            "1",
            "--max-k",
            "2",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    rows = list(csv.DictReader(out.with_suffix(".csv").open()))
    # 2 values of K x 4 variants x 2 parts.
    assert len(rows) == 16
    k1 = {float(r["median"]) for r in rows if r["K"] == "1" and r["part"] == "whole loss"}
    assert len(k1) == 1  # at K = 1 no link is scaled: every variant gives the same gradient
    assert out.with_suffix(".png").stat().st_size > 10_000


@pytest.mark.slow
def test_bench_atari_counts_the_papers_flops_and_runs(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench_atari.py"),
            "--size",
            "tiny",
            "--batch",
            "4",
            "--steps",
            "1",
            "--envs",
            "1",
            "--moves",
            "1",
            "--simulations",
            "2",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout
    # Tiny: 8 planes at 6x6; the representation's first conv alone is 48*48*4*9*128*2 = 21.2 MFLOP.
    assert "training step:" in lines and "self-play:" in lines and "x the matmul reference" in lines
    flops = float(lines.split("representation ")[1].split(",")[0])
    assert 0.0212 < flops < 0.05


def test_bench_scaling_prints_a_table(tmp_path):
    import os

    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench_scaling.py"),
            "--config",
            str(ROOT / "configs" / "tiny.yaml"),
            "--actors",
            "1",
            "--intervals",
            "2",
            "--interval-seconds",
            "1",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env=dict(os.environ, RAY_USAGE_STATS_ENABLED="0"),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")][2:]
    # One row for the local back end, one for 1 actor, whose efficiency is 1 by definition.
    assert [row.split(" | ")[0] for row in rows] == ["| local (in-process)", "| ray, 1 actor"]
    assert rows[1].endswith("| 1.00 |")


def test_bench_boardgames_curve_and_plot_from_a_run(tictactoe_tiny_run, tmp_path):
    bench = load_script("bench_boardgames")
    # The shared run evaluated 4 games against the random player at step 20: one curve point,
    # its fractions summing to 1 and its score win + draw / 2.
    (point,) = bench.curve(tictactoe_tiny_run, seed=0)
    assert (point["training_step"], point["opponent"]) == (20, "random") and point["env_steps"] > 0
    assert point["win"] + point["draw"] + point["loss"] == 1.0
    assert point["score"] == point["win"] + 0.5 * point["draw"]
    bench.plot([point, dict(point, opponent="perfect")], tmp_path / "score.png", "test")
    assert (tmp_path / "score.png").stat().st_size > 10_000


def test_bench_boardgames_sets_the_budget_as_the_runs_time_limit(tmp_path, monkeypatch):
    bench = load_script("bench_boardgames")
    started = []

    class Finished:  # a `muzero train` that ended by itself, exit 0
        returncode = 0

        def __init__(self, command, **kwargs):
            started.append(command)

        def wait(self, timeout=None):
            started.append(timeout)

    monkeypatch.setattr(bench.subprocess, "Popen", Finished)
    bench.train_for(bench.CONFIGS["connect4"], tmp_path / "connect4_seed0", 0, 1.5, ["search.algorithm=gumbel"])
    command, timeout = started
    # The budget is the run's own (a resume keeps it), after the caller's settings; the process
    # is stopped from outside only 900 s past it (90 s of budget + 900 s of grace).
    assert command[-4:] == ["--set", "search.algorithm=gumbel", "--set", "run.time_limit_minutes=1.5"]
    assert timeout == 990
    # A budget of 0 would be run.time_limit_minutes 0, no limit: refused with exit status 2.
    monkeypatch.setattr(sys, "argv", ["bench", "--game", "connect4", "--minutes", "0", "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as stopped:
        bench.main()
    assert stopped.value.code == 2 and started == [command, timeout]
    # A folder that exists (an interrupted run) continues with `muzero train --resume`: no seed,
    # settings or budget of this call (the run keeps its own), and its log grows at the end.
    run_dir = tmp_path / "connect4_seed0"
    run_dir.mkdir()
    (tmp_path / "connect4_seed0.log").write_text("first part\n")
    started.clear()
    bench.train_for(bench.CONFIGS["connect4"], run_dir, 0, 1.5, ["search.algorithm=gumbel"])
    assert started[0][2:] == ["muzero.cli", "train", "--resume", str(run_dir)]
    assert (tmp_path / "connect4_seed0.log").read_text() == "first part\n"
    # A run that fails is named with its log's last line (the CLI's one-line error).
    Finished.returncode = 2
    (tmp_path / "connect4_seed0.log").write_text("muzero: error: RUN: in use by pid 7\n")
    with pytest.raises(SystemExit, match="training failed \\(exit 2\\): muzero: error: RUN: in use by pid 7"):
        bench.train_for(bench.CONFIGS["connect4"], run_dir, 0, 1.5, [])


# The header `muzero evaluate --csv` writes above its one row per side.
FINAL_HEADER = "training_step,opponent,side,games,win,draw,loss\n"


def test_bench_boardgames_reads_final_matches_of_a_measured_seed(tmp_path):
    bench = load_script("bench_boardgames")
    run_dir = tmp_path / "tictactoe_seed1"
    run_dir.mkdir()
    # `muzero evaluate --csv` writes one row per side; `mcts:200` is written as mcts_200.
    assert bench.final_table(run_dir, "mcts:200") == run_dir / "final-mcts_200.csv"
    (run_dir / "final-random.csv").write_text(FINAL_HEADER + "9,random,first,2,2,0,0\n9,random,second,2,1,1,0\n")
    (run_dir / "final-mcts_200.csv").write_text(FINAL_HEADER + "9,mcts:200,first,2,0,1,1\n")
    rows = bench.final_rows(run_dir, ["random", "mcts:200"])
    # Three rows in the order of the opponents, each naming its run folder.
    assert [(row["opponent"], row["side"], row["win"], row["run"]) for row in rows] == [
        ("random", "first", "2", "tictactoe_seed1"),
        ("random", "second", "1", "tictactoe_seed1"),
        ("mcts:200", "first", "0", "tictactoe_seed1"),
    ]


def test_bench_boardgames_reads_measured_seeds_and_resumes_a_partial_one(tictactoe_tiny_run, tmp_path, monkeypatch):
    bench = load_script("bench_boardgames")
    trained = []
    monkeypatch.setattr(bench, "train_for", lambda *args: trained.append(args) or 0.0)
    done = tmp_path / "tictactoe_seed0"
    done.mkdir()
    (done / "final-random.csv").write_text(FINAL_HEADER + "9,random,first,1,1,0,0\n")
    argv = ["bench", "--game", "tictactoe", "--out", str(tmp_path), "--final-opponents", "random", "--seeds", "0"]
    monkeypatch.setattr(sys, "argv", argv)
    bench.main()
    # Seed 0 was read, not trained; its row is in the table.
    assert trained == [] and "tictactoe_seed0" in (tmp_path / "tictactoe_final.csv").read_text()
    # A folder without any final match that cannot be resumed (no config.yaml: killed at its
    # start) stops the benchmark with the reason and what to do, before any training.
    (tmp_path / "tictactoe_seed1").mkdir()
    monkeypatch.setattr(sys, "argv", [*argv[:-1], "1"])
    with pytest.raises(SystemExit, match=r"tictactoe_seed1: not a run directory .*; remove .* from scratch"):
        bench.main()
    assert trained == []
    # A folder without any final match with a checkpoint (an interrupted run: here a real run
    # folder) is trained on (train_for resumes it), then plays its final match, in the table.
    (tmp_path / "tictactoe_seed1").rmdir()
    shutil.copytree(tictactoe_tiny_run, tmp_path / "tictactoe_seed1")

    def first_final(run_dir, opponents, games, simulations=None):
        (run_dir / "final-random.csv").write_text(FINAL_HEADER + "9,random,first,1,0,0,1\n")

    monkeypatch.setattr(bench, "final_matches", first_final)
    bench.main()
    assert [args[1].name for args in trained] == ["tictactoe_seed1"]
    assert "9,random,first,1,0,0,1,tictactoe_seed1" in (tmp_path / "tictactoe_final.csv").read_text()
    trained.clear()
    # Seed 0 asked for one more opponent: only the missing match is played (no training), and
    # the table holds both opponents' rows.
    played = []

    def final_matches(run_dir, opponents, games, simulations=None):
        played.append((run_dir.name, opponents))
        (run_dir / "final-perfect.csv").write_text(FINAL_HEADER + "9,perfect,first,1,0,1,0\n")

    monkeypatch.setattr(bench, "final_matches", final_matches)
    monkeypatch.setattr(sys, "argv", [*argv[:-3], "random", "perfect", "--seeds", "0"])
    bench.main()
    assert trained == [] and played == [("tictactoe_seed0", ["perfect"])]
    table = (tmp_path / "tictactoe_final.csv").read_text()
    assert "random,first" in table and "perfect,first" in table
    # Asked only for an opponent it has not met, the finished run is still not trained again.
    (done / "final-perfect.csv").unlink()
    played.clear()
    monkeypatch.setattr(sys, "argv", [*argv[:-3], "perfect", "--seeds", "0"])
    bench.main()
    assert trained == [] and played == [("tictactoe_seed0", ["perfect"])]


def test_bench_boardgames_final_matches_with_their_own_search_budget(tmp_path, monkeypatch):
    bench = load_script("bench_boardgames")
    # A budget gets its own file beside the run's-budget one: final-<opponent>-sims<N>.csv.
    assert bench.final_table(tmp_path, "mcts:200", 800) == tmp_path / "final-mcts_200-sims800.csv"
    commands = []

    class Played:  # a `muzero evaluate` that succeeded
        returncode, stdout, stderr = 0, "", ""

    monkeypatch.setattr(bench.subprocess, "run", lambda command, **kwargs: commands.append(command) or Played)
    bench.final_matches(tmp_path, ["mcts:200"], 10, 800)
    bench.final_matches(tmp_path, ["mcts:200"], 10)
    # With a budget the CLI is asked for it after the table; without, nothing is added.
    assert commands[0][-3:] == [str(tmp_path / "final-mcts_200-sims800.csv"), "--simulations", "800"]
    assert commands[1][-1] == str(tmp_path / "final-mcts_200.csv") and "--simulations" not in commands[1]
    # A measured seed asked for 800 plays that match only, and the table goes to its own file,
    # leaving the run's-budget table as it was.
    done = tmp_path / "out" / "tictactoe_seed0"
    done.mkdir(parents=True)
    (done / "final-random.csv").write_text(FINAL_HEADER + "9,random,first,1,1,0,0\n")
    played = []

    def final_matches(run_dir, opponents, games, simulations=None):
        if opponents:  # the real one plays nothing for an empty list
            played.append((run_dir.name, opponents, simulations))
        for opponent in opponents:  # a loss, told apart from the run's-budget table's win
            table = bench.final_table(run_dir, opponent, simulations)
            table.write_text(FINAL_HEADER + f"9,{opponent},first,1,0,0,1\n")

    monkeypatch.setattr(bench, "final_matches", final_matches)
    monkeypatch.setattr(bench, "train_for", lambda *args: pytest.fail("a measured seed was trained"))
    argv = ["bench", "--game", "tictactoe", "--out", str(tmp_path / "out"), "--final-opponents", "random"]
    monkeypatch.setattr(sys, "argv", [*argv, "--seeds", "0", "--final-simulations", "800"])
    bench.main()
    assert played == [("tictactoe_seed0", ["random"], 800)]
    assert "random,first,1,0,0,1" in (tmp_path / "out" / "tictactoe_final_sims800.csv").read_text()
    assert not (tmp_path / "out" / "tictactoe_final.csv").exists()
    # Asked again, the 800 match is there: nothing is played.
    bench.main()
    assert len(played) == 1
    # A folder holding only an 800 table is measured too: not trained, and without the flag
    # it plays only the run's-budget match.
    only_800 = tmp_path / "out" / "tictactoe_seed1"
    only_800.mkdir()
    (only_800 / "final-random-sims800.csv").write_text(FINAL_HEADER + "9,random,first,1,0,0,1\n")
    monkeypatch.setattr(sys, "argv", [*argv, "--seeds", "1"])
    bench.main()
    assert played[1:] == [("tictactoe_seed1", ["random"], None)]
    # A budget under 1 is refused with exit status 2 before anything is played.
    monkeypatch.setattr(sys, "argv", [*argv, "--final-simulations", "0"])
    with pytest.raises(SystemExit) as stopped:
        bench.main()
    assert stopped.value.code == 2 and len(played) == 2


def test_train_command_of_the_benchmarks(tmp_path):
    benchlib = load_script("benchlib")
    command = benchlib.train_command("c.yaml", tmp_path / "run", 3, ["a.b=1", "c=2"])
    # This interpreter runs the CLI module; the seed comes first among the overrides, then
    # the overrides in the order given, each behind its own --set.
    assert command == [
        sys.executable, "-m", "muzero.cli", "train", "--config", "c.yaml", "--logdir", str(tmp_path / "run"),
        "--set", "run.seed=3", "--set", "a.b=1", "--set", "c=2",
    ]  # fmt: skip


class _TwoPlyState:
    """A game small enough to work by hand: player 0 picks 0 (a draw, the end) or 1; after 1,
    player 1 picks 0 (player 0 wins), 1 or 2 (draws)."""

    def __init__(self, history=()):
        self.history = tuple(history)

    def apply_action(self, action):
        self.history += (action,)

    def is_terminal(self):
        return self.history == (0,) or len(self.history) == 2

    def player_return(self, player):
        won = self.history == (1, 0)
        return (1.0 if player == 0 else -1.0) if won else 0.0

    def current_player(self):
        return len(self.history)

    def legal_actions(self):
        return [0, 1] if not self.history else [0, 1, 2]


def test_perfect_vs_random_expectation_by_hand():
    script = load_script("perfect_vs_random")
    game = SimpleNamespace(new_initial_state=_TwoPlyState)
    # Both of player 0's moves are worth a draw (player 1 answers 1 with a draw), so the
    # perfect player picks either. Move 0 draws; move 1 wins when random picks 0 (1 in 3),
    # draws otherwise: win 1/2 * 1/3 = 1/6, draw 1/2 + 1/2 * 2/3 = 5/6, loss 0.
    perfect = SimpleNamespace(optimal_actions=lambda state: [0, 1])
    win, draw, loss = script.expected_outcome(game, perfect, player=0)
    assert (win, draw, loss) == pytest.approx((1 / 6, 5 / 6, 0.0))
    # Preferring the optimal move with more wins: move 1 (1/3, 2/3, 0); with fewer: move 0.
    assert script.expected_outcome(game, perfect, 0, "best") == pytest.approx((1 / 3, 2 / 3, 0.0))
    assert script.expected_outcome(game, perfect, 0, "worst") == (0.0, 1.0, 0.0)


def test_perfect_vs_random_at_tictactoe_equals_an_independent_minimax():
    from muzero.arena import make_opponent
    from muzero.envs.openspiel import load_game

    script = load_script("perfect_vs_random")
    game = load_game("tic_tac_toe")
    perfect = make_opponent("perfect", game, seed=0)
    # An independent reference: a pure-Python minimax of the tic-tac-toe tree (no OpenSpiel),
    # averaged the same way, gave these fractions exactly; 0 losses because exact negamax
    # never loses, whatever the opponent plays.
    expected = {0: (75257 / 77760, 2503 / 77760, 0.0), 1: (2645 / 3402, 757 / 3402, 0.0)}
    for player in (0, 1):
        assert script.expected_outcome(game, perfect, player) == pytest.approx(expected[player])


def test_probe_tictactoe_categories_by_hand():
    probe = load_script("probe_tictactoe")
    # Boards as 9 characters, row by row; player 0 is x.
    assert probe.category("xx.......", 0) == "win-now"  # x completes the top row at 2
    assert probe.category("xx..o....", 1) == "single-threat"  # o must block cell 2
    # x threatens 2 (top row) and 6 (left column); o, to move, has no line of its own.
    assert probe.category("xx.xo...o", 1) == "double-threat"
    assert probe.category(".........", 0) == "quiet"


def test_probe_tictactoe_reads_a_run(tictactoe_tiny_run, monkeypatch, capsys):
    probe = load_script("probe_tictactoe")
    monkeypatch.setattr(sys, "argv", ["probe", "--run", str(tictactoe_tiny_run)])
    probe.main()
    out = capsys.readouterr().out
    # Tic-tac-toe has 5,478 legal positions, 958 of them terminal: 4,520 to probe.
    assert "4520 positions" in out
    # Where the mover can complete a line, the solver's value is +1 and nothing else.
    assert "| win-now | +1 |" in out
    assert "| win-now | +0 |" not in out and "| win-now | -1 |" not in out
    # The first-move prior: 3 rows of 3 probabilities summing to 1.
    prior = [float(p) for line in out.splitlines()[-3:] for p in line.split()]
    assert len(prior) == 9 and sum(prior) == pytest.approx(1.0, abs=0.02)


def test_bench_throughput_counts_a_dense_and_a_conv_layer_by_hand():
    import keras
    import tensorflow as tf

    bench = load_script("bench_throughput")

    def forward_backward(layer, x, wrt_input=True):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
        return y, tape.gradient(y, [x, layer.kernel] if wrt_input else layer.kernel)

    # Dense 3 -> 4 (no bias) on a batch of 2: the forward x[2,3] @ W[3,4] is 2*2*3*4 = 48
    # FLOPs; the backward is dx = g[2,4] @ W^T[4,3] (2*2*4*3 = 48) and dW = x^T[3,2] @ g[2,4]
    # (2*3*2*4 = 48): 144 in all, 3 x the forward.
    dense = keras.layers.Dense(4, use_bias=False)
    dense.build((2, 3))
    counts = bench.graph_flops(lambda x: forward_backward(dense, x), tf.TensorSpec([2, 3]))
    assert counts == {"MatMul": 144} and 3 * bench.matmul_flops(2, 3, 4) == 144
    # Without dx, its product is left out (as at run time, and as XLA drops it): 48 + 48.
    counts = bench.graph_flops(lambda x: forward_backward(dense, x, wrt_input=False), tf.TensorSpec([2, 3]))
    assert counts == {"MatMul": 96}
    # A 3x3 SAME convolution of one 4x4 image, 2 -> 3 planes: 2*1*4*4*3*(3*3*2) = 1,728 FLOPs,
    # and as many for each of its two backprops (to the input, to the kernel).
    conv = keras.layers.Conv2D(3, 3, padding="same", use_bias=False)
    conv.build((1, 4, 4, 2))
    counts = bench.graph_flops(lambda x: forward_backward(conv, x), tf.TensorSpec([1, 4, 4, 2]))
    assert counts == {"Conv2D": 1728, "Conv2DBackpropInput": 1728, "Conv2DBackpropFilter": 1728}
    assert bench.conv_flops(1, 4, 4, 3, (3, 3, 2)) == 1728
    assert bench.KERNELS[0].flops == 2 * 1024**3


def test_bench_throughput_times_kernels_with_and_without_xla():
    bench = load_script("bench_throughput")
    kernels = [
        bench.Kernel("matmul", "matmul", (8, 8), (8, 8)),
        bench.Kernel("conv", "conv", (1, 4, 4, 2), (3, 3, 2, 2)),
    ]
    measured = bench.measure_kernels(kernels, repetitions=1)
    # Each kernel with and without XLA, chained up to MAX_CHAIN ops per call (tiny ops: the cap).
    assert [(row["kernel"], row["xla"], row["ops_per_call"]) for row in measured["kernels"]] == [
        ("matmul", False, 64), ("matmul", True, 64), ("conv", False, 64), ("conv", True, 64),
    ]  # fmt: skip
    assert all(row["gflops"] > 0 for row in measured["kernels"]) and measured["empty_call_us"]["xla"] > 0


def test_bench_throughput_steps_and_selfplay_on_the_tiny_config(tmp_path):
    bench = load_script("bench_throughput")
    argv = ["--sections", "steps,selfplay", "--configs", str(ROOT / "configs" / "tiny.yaml"), "--out", str(tmp_path)]
    results = bench.main([*argv, "--steps", "1", "--moves", "2"])
    (step,) = results["steps"]
    # Forward + backward: about 3 x the forward pass (the first layer has no input gradient).
    assert step["gflop_per_step"] > 0 and 2.5 < step["step_over_forward"] < 3.1
    assert step["train_step_ms"] > 0 and "fraction_of_matmul" not in step  # no flops section: no reference
    (selfplay,) = results["selfplay"]
    assert selfplay["moves"] == 2 * selfplay["games"] and selfplay["moves_per_s"] > 0
    assert {p.name for p in tmp_path.iterdir()} == {"steps.csv", "selfplay.csv", "results.json"}


def test_bench_throughput_reads_a_training_run():
    bench = load_script("bench_throughput")
    progress = (
        "progress.py:133] step {}/1000000000 (0.0%) ETA 1:00:00 | games {} | moves {} | return(last 20) 9.2 | loss -"
    )
    lines = [
        (10.0, progress.format(100, 5, 200)),
        (30.0, progress.format(500, 20, 1000)),
        (50.0, progress.format(1500, 60, 3000)),
        (55.0, "commands.py:104] stopped by SIGINT at training step 1600 with a final checkpoint; continue with: ..."),
    ]
    # The whole machine's busy and total jiffies and the run's own CPU seconds, sampled at 0, 30, 40 and 50 s.
    samples = [
        {"seconds": s, "busy": b, "total": t, "run_seconds": r}
        for s, b, t, r in ((0, 0, 0, 0), (30, 50, 100, 30), (40, 130, 200, 38), (50, 190, 300, 48))
    ]
    summary = bench.summarize_run(lines, samples, stopped_at=52.0, cores=2)
    # From 30 to 50 s: 1,000 steps and 2,000 moves in 20 s; whole run: 1,600 steps in the 52 s to the signal.
    assert summary["final_step"] == 1600 and summary["whole_steps_per_s"] == 1600 / 52
    assert summary["steady_steps_per_s"] == 50 and summary["steady_env_steps_per_hour"] == 360_000
    assert summary["steady_steps_per_env_step"] == 0.5 and summary["whole_env_steps_per_hour"] == 3000 / 50 * 3600
    assert summary["whole_steps_per_env_step"] == 1500 / 3000  # at the last progress line
    # Machine (of 200%): 80 and 60 of 100 jiffies busy after 30 s -> 160% and 120%, median 140%; mean 190/300.
    assert summary["cpu_median_steady"] == 140 and summary["cpu_mean"] == 200 * 190 / 300
    # The run's processes: 8 and 10 CPU seconds in 10 s -> 80% and 100%; 48 s in 50 s overall.
    assert summary["run_cpu_median_steady"] == 90 and summary["run_cpu_mean"] == 96
    # /proc/stat: busy = user + nice + system + irq + softirq + steal; total adds idle and iowait.
    assert bench.cpu_jiffies("cpu  10 2 3 100 5 1 1 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n") == (17, 122)


def test_plot_scalars_reads_a_runs_replay_bytes(tiny_run, tmp_path):
    plot = load_script("plot_scalars")
    steps, values = plot.read_scalars(tiny_run, "replay/bytes")
    # Written at each collection with new games, step by step; never more than the window
    # (20 games) of CartPole's at most 50 moves: 20 x (51 x 16 + 8 x 50 x 3 + 8 x 50 x 2) bytes.
    assert steps == sorted(steps) and len(steps) > 0
    assert all(0 < value <= 20 * (51 * 16 + 8 * 50 * 5) for value in values)
    out = tmp_path / "bytes.png"
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "plot_scalars.py"), str(tiny_run), "replay/bytes", "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0 and out.stat().st_size > 0, result.stderr[-2000:]


def _run_with_evaluations(tmp_path: Path, rows: str) -> Path:
    """A run folder whose eval.csv holds `rows` (lines of the columns `Evaluator` writes)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "eval.csv").write_text(
        "training_step,env_steps,games,wall_seconds,eval_seconds,mean_return,std_return\n" + rows
    )
    return run


def test_plot_learning_curve_draws_dqns_curve_beside_a_run(tmp_path):
    run = _run_with_evaluations(tmp_path, "1000,5000,10,60.0,1.0,3.0,0.5\n2000,10000,20,120.0,2.0,4.0,0.5\n")
    plot = load_script("plot_learning_curve")

    def lines(fig, panel: int) -> list[tuple[list, list]]:
        return [(list(line.get_xdata()), list(line.get_ydata())) for line in fig.axes[panel].get_lines()]

    # The run (its two evaluations) on the steps panel, then DQN's Space Invaders curve to its first
    # point, 0.1M (the run reaches 10,000 steps), and no line at 200.
    steps_panel = lines(plot.draw([run], ["run"], "space_invaders"), 1)
    assert steps_panel == [([5000.0, 10000.0], [3.0, 4.0]), ([1e5], [16.1])]
    # One legend, below the panels (none on them): the run and DQN, in one row of the 3 columns.
    figure = plot.draw([run], ["run"], "space_invaders")
    names = [text.get_text() for text in figure.legends[0].get_texts()]
    assert names == ["run", "DQN (Young & Tian 2019, training returns)"]
    assert all(axis.get_legend() is None for axis in figure.axes)
    assert plot.legend_height(figure) == pytest.approx(0.06)
    # A run that has not evaluated yet (eval.csv's header only), no DQN: nothing labelled, no legend.
    (tmp_path / "fresh").mkdir()
    fresh = plot.draw([_run_with_evaluations(tmp_path / "fresh", "")], ["fresh"])
    assert fresh.legends == [] and plot.legend_height(fresh) == 0
    # Without --dqn: CartPole's line at 200 on both panels (axhline: y 200 at both ends), no DQN.
    cartpole = plot.draw([run], ["run"])
    for panel in (0, 1):
        drawn = lines(cartpole, panel)
        assert len(drawn) == 2 and list(drawn[1][1]) == [200, 200]
    # From the command line: a PNG; a game without DQN's curve: argparse's line, status 2, no plot.
    command = [sys.executable, str(ROOT / "scripts" / "plot_learning_curve.py"), str(run)]
    for game, status in (("space_invaders", 0), ("pong", 2)):
        out = tmp_path / f"{game}.png"
        result = subprocess.run(
            [*command, "--out", str(out), "--dqn", game, "--table"],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert result.returncode == status, result.stderr[-2000:]
        assert out.exists() == (status == 0)
        # --table: the header, its rule and one row per evaluation (DQN's curve starts at 0.1M: "-").
        expected = [
            "| run | training step | environment steps | greedy return | std | DQN |",
            "| --- | --- | --- | --- | --- | --- |",
            "| run | 1000 | 5,000 | 3.00 | 0.50 | - |",
            "| run | 2000 | 10,000 | 4.00 | 0.50 | - |",
        ]
        assert [line for line in result.stdout.splitlines() if line.startswith("|")] == (
            expected if status == 0 else []
        )
    assert "--dqn" in result.stderr
    # A folder without eval.csv: one line naming it, status 2, no plot.
    missing = tmp_path / "missing"
    result = subprocess.run(
        [*command[:2], str(missing), "--out", str(tmp_path / "m.png")],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 2 and f"{missing}: no eval.csv" in result.stderr
    assert not (tmp_path / "m.png").exists()


def test_plot_learning_curve_tables_each_evaluation_beside_dqn(tmp_path):
    run = _run_with_evaluations(tmp_path, "5000,50000,300,60.0,1.0,3.0,0.5\n17500,175000,900,120.0,2.0,12.346,2.0\n")
    rows = load_script("plot_learning_curve").table([run], ["seed 0"], "space_invaders").splitlines()
    # A header and its rule, then one row per evaluation. DQN's Space Invaders curve starts at
    # 0.1M, so 50k has none; 175k is halfway between (0.1M, 16.1) and (0.25M, 21.7): 18.9.
    assert rows[2] == "| seed 0 | 5000 | 50,000 | 3.00 | 0.50 | - |"
    assert rows[3] == "| seed 0 | 17500 | 175,000 | 12.35 | 2.00 | 18.90 |"
    assert len(rows) == 4
    # Without a game: no DQN column's values.
    assert load_script("plot_learning_curve").table([run], ["seed 0"]).splitlines()[3].endswith("| 2.00 | - |")


def test_probe_actions_rows_by_hand():
    from types import SimpleNamespace as Game

    probe = load_script("probe_actions")
    games = [
        Game(
            history=[0, 1, 1], rewards=[0, 1, 0], child_visits=[[0.5, 0.5], [0.25, 0.75], [0, 1]], root_values=[1, 2, 3]
        ),
        Game(history=[1], rewards=[2], child_visits=[[1, 0]], root_values=[-2]),
        Game(history=[0, 0], rewards=[0, 0], child_visits=[[1, 0], [1, 0]], root_values=[0.5, 0.25]),
    ]
    first, second = probe.action_rows(games, 2, slices=2)
    # 3 games in 2 slices: games 0-1, then game 2. The first: 4 moves, actions 0, 1, 1, 1 (a quarter
    # and three quarters), returns 1 and 2 (mean 1.5), visits to action 0 (0.5 + 0.25 + 0 + 1) / 4,
    # root values (1 + 2 + 3 - 2) / 4 = 1 over its moves; the second's (0.5 + 0.25) / 2.
    assert first["games"] == (0, 1) and first["moves"] == 4 and first["return"] == pytest.approx(1.5)
    assert first["root value"] == pytest.approx(1.0) and second["root value"] == pytest.approx(0.375)
    np.testing.assert_allclose(first["played"], [0.25, 0.75])
    np.testing.assert_allclose(first["visits"], [0.4375, 0.5625])
    assert second["games"] == (2, 2) and second["moves"] == 2 and second["return"] == 0.0
    np.testing.assert_allclose(second["played"], [1.0, 0.0])
    # More slices than games: one per game.
    assert len(probe.action_rows(games, 2, slices=5)) == 3


def test_probe_actions_reads_a_run(tiny_run, tmp_path, capsys):
    probe = load_script("probe_actions")
    probe.main(["--run", str(tiny_run), "--slices", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{tiny_run} at training step 30:")
    # CartPole's 2 actions: a header, its rule and 2 rows whose shares of moves sum to 1.
    assert lines[1] == "| games | moves | mean return | played 0 | played 1 | visits 0 | visits 1 | root value |"
    rows = [line.split(" | ") for line in lines[3:]]
    assert len(rows) == 2 and all(float(r[3]) + float(r[4]) == pytest.approx(1.0, abs=2e-3) for r in rows)
    # A folder without a checkpoint: argparse's one line and status 2.
    with pytest.raises(SystemExit) as exit_info:
        probe.main(["--run", str(tmp_path)])
    assert exit_info.value.code == 2 and f"{tmp_path}: no complete checkpoint" in capsys.readouterr().err


def test_probe_root_sends_the_pseudocode_roots_first_simulation_to_the_largest_action(capsys):
    probe = load_script("probe_root")
    tiny = str(Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml")
    probe.main(["--config", tiny, "--networks", "2", "--moves", "3"])
    lines = capsys.readouterr().out.splitlines()
    # 2 networks x 3 moves (CartPole lasts 8 moves or more): 6 searches.
    assert lines[0].endswith("6 searches of 4 simulations (count_root_evaluation: False)"), lines[0]
    rows = [line.strip("| ").split(" | ") for line in lines[3:]]
    # The pseudocode's root has visit count 0: pUCT's prior term is 0 for both children, their
    # value terms 0, and the tie goes to the larger action, 1, in every search.
    assert [row[:2] for row in rows] == [["0", "0.000"], ["1", "1.000"]]
    # Each column's shares sum to 1 over CartPole's 2 actions.
    assert all(float(rows[0][i]) + float(rows[1][i]) == pytest.approx(1.0, abs=1e-3) for i in (1, 2, 3))
    # Bad input: argparse's one line and status 2.
    for argv, message in (
        (["--networks", "0"], "--networks: expected at least 1, got 0"),
        (["--set", "search.algorithm=gumbel"], "search.algorithm: this probe runs the pUCT search"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            probe.main(["--config", tiny, *argv])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_soak_checks_what_a_fault_may_cost():
    soak = load_script("soak")
    # Keeping 3, before the fault 30, 20, 10 complete. After it 50, 40, 30, 20: 10 went with
    # three newer ones on disk (20, 30, 40...), the rotation. After it 50, 40, 30: 20 has three
    # newer ones too. After it 40, 30: 20 and 10 have two newer ones only, so both are lost.
    assert soak.lost_checkpoints([30, 20, 10], [50, 40, 30, 20], keep=3) == []
    assert soak.lost_checkpoints([30, 20, 10], [50, 40, 30], keep=3) == []
    assert soak.lost_checkpoints([30, 20, 10], [40, 30], keep=3) == [10, 20]
    expect = soak.Expect(checkpoint=400, step=350, games=120)
    assert soak.check_resume(expect, 400, 120) == []
    assert soak.check_resume(expect, 200, 119) == [
        "resumed from ckpt-200, not ckpt-400 (the newest that loads)",
        "resumed at step 200, below 350: one checkpoint interval before the step reached",
        "resumed with 119 games, fewer than the 120 logged or checkpointed",
    ]


def test_probe_value_step_rows_by_hand():
    probe = load_script("probe_value")
    # Two samples, one step (K = 0), 3 value bins, 2 actions.
    target = {
        "support": np.array([[[0.0, 0.5, 0.5]], [[0.0, 0.0, 1.0]]]),
        "scalar": np.array([[0.5], [1.0]]),
        "policy": np.array([[[0.5, 0.5]], [[0.0, 0.0]]]),  # none past the end, as replay's
    }
    end = {"support": np.array([[[0.0, 0.0, 1.0]], [[0.0, 0.0, 1.0]]]), "scalar": np.array([[1.0], [1.0]])}
    rows = probe.step_rows(
        # Softmax of log(1, 1, 2): (1/4, 1/4, 1/2), the same for both samples.
        value_logits=np.log(np.array([[[1.0, 1.0, 2.0]], [[1.0, 1.0, 2.0]]])),
        value=np.array([[0.2], [-0.4]]),
        policy_logits=np.zeros((2, 1, 2)),  # uniform: cross-entropy ln 2 against a distribution
        target=target,
        end=end,
        policy_mask=np.array([[1.0], [0.0]]),  # the second sample is past its game's end
    )
    expected = [
        # -(0.5 ln 1/4 + 0.5 ln 1/2) = 1.5 ln 2, and -ln 1/2 = ln 2: mean 1.25 ln 2
        1.25 * np.log(2),
        np.log(2) / 2,  # entropies ln 2 and 0
        np.log(2),  # -ln 1/2 for both
        (0.3**2 + 1.4**2) / 2,  # 0.2 - 0.5, -0.4 - 1.0
        (0.8**2 + 1.4**2) / 2,  # 0.2 - 1, -0.4 - 1
        (0.5**2 + 0.0) / 2,  # 0.5 - 1, 1 - 1
        1.0,
        np.log(2) / 2,  # ln 2 and the masked 0, over both samples as muzero_loss takes the mean
        np.log(2) / 2,
    ]
    assert rows.shape == (1, len(probe.COLUMNS))
    np.testing.assert_allclose(rows[0], expected, rtol=1e-12)


def _probe_columns(probe, table: np.ndarray) -> dict:
    return dict(zip(probe.COLUMNS, table.T))


def test_probe_value_reads_a_run(tictactoe_tiny_run, capsys):
    probe = load_script("probe_value")
    probe.main(["--run", str(tictactoe_tiny_run), "--batches", "2"])
    lines = capsys.readouterr().out.splitlines()
    # configs/tictactoe.yaml unrolls 5 steps: rows k = 0..5 and the sum.
    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| k") and "---" not in line]
    table = np.array([[float(x) for x in row.split("|")[2:11]] for row in rows[:-1]])
    assert table.shape == (6, 9)
    columns = _probe_columns(probe, table)
    # A cross-entropy is at least its target's entropy (Gibbs' inequality): no loss under its floor.
    assert (columns["value loss"] >= columns["value floor"] - 1e-3).all()
    assert (columns["policy loss"] >= columns["policy floor"] - 1e-3).all()
    # Tic-tac-toe's returns to the end are -1, 0 or +1 for the mover (0 past the end).
    assert ((columns["end squared"] >= 0) & (columns["end squared"] <= 1 + 1e-6)).all()
    # td_steps 2 bootstraps from the searches' root values, which are not the outcomes.
    assert columns["target sq. error vs end"][0] > 0


def test_probe_value_targets_to_the_end_equal_the_returns(tictactoe_tiny_run, monkeypatch):
    import muzero.config_loader

    probe = load_script("probe_value")
    load_config = muzero.config_loader.load_config

    def to_the_end(*args, **kwargs):  # the run's config with td_steps 9, tic-tac-toe's longest game
        config = load_config(*args, **kwargs)
        return replace(config, train=replace(config.train, td_steps=config.game.max_moves))

    monkeypatch.setattr(muzero.config_loader, "load_config", to_the_end)
    _, table = probe.probe(tictactoe_tiny_run, 2, 0)
    columns = _probe_columns(probe, table)
    # Training's targets then reach every game's end: the same positions get the same targets twice.
    np.testing.assert_allclose(columns["target sq. error vs end"], 0.0, atol=1e-12)
    np.testing.assert_allclose(columns["value loss"], columns["value loss vs end"], rtol=1e-6)
    np.testing.assert_allclose(columns["value sq. error"], columns["value sq. error vs end"], rtol=1e-6)


def test_probe_value_bootstraps_from_the_target_network(tictactoe_tiny_run, monkeypatch):
    import muzero.config_loader
    from muzero.reanalyse import TargetNetwork

    probe = load_script("probe_value")
    load_config = muzero.config_loader.load_config

    def with_reanalyse(*args, **kwargs):  # Reanalyse on, its value targets 1 step long
        config = load_config(*args, **kwargs)
        return replace(config, reanalyse=replace(config.reanalyse, fraction=0.5, td_steps=1))

    monkeypatch.setattr(muzero.config_loader, "load_config", with_reanalyse)
    monkeypatch.setattr(TargetNetwork, "values", lambda self, observation: np.full(len(observation), 0.3))
    seen = []
    step_rows = probe.step_rows
    monkeypatch.setattr(probe, "step_rows", lambda *a, **kw: seen.append(a[3]["scalar"][:, 0]) or step_rows(*a, **kw))
    probe.probe(tictactoe_tiny_run, 2, 0)
    targets = np.round(np.concatenate(seen).astype(np.float64), 6)
    # One step ahead the opponent moves: θ⁻'s 0.3 counts as -0.3 for the mover, with no reward
    # before the game ends; a move that ends the game gets its reward alone (+1 win, 0 draw).
    assert set(targets.tolist()) <= {-0.3, 0.0, 1.0}
    assert (targets == -0.3).any()


def test_probe_greedy_rules_by_hand():
    probe = load_script("probe_greedy")
    rng = np.random.default_rng(0)
    legal = np.array([True, True, True, False])
    # Visits 5, 5, 3 and 9 on an illegal action: the top legal count 5 is shared by actions 0 and 1.
    counts = np.array([5, 5, 3, 9])
    assert probe.tie_counts(counts, legal) == (True, 1)  # `larger` takes 1, the larger of the two
    assert probe.pick(counts, legal, "larger", 0.0, rng) == 1
    assert {probe.pick(counts, legal, "random_ties", 0.0, rng) for _ in range(50)} == {0, 1}
    # No tie: 6 > 5 > 3, so both tie rules take action 0.
    counts = np.array([6, 5, 3, 9])
    assert probe.tie_counts(counts, legal) == (False, 0)
    assert probe.pick(counts, legal, "random_ties", 0.0, rng) == 0
    # Temperature 1: p = N / sum N over the legal actions, (6, 5, 3) / 14; 7,000 draws land within
    # 4 standard errors (sqrt(p (1 - p) / 7000) <= 0.006) of it, and never on the illegal action.
    draws = np.bincount([probe.pick(counts, legal, "temperature", 1.0, rng) for _ in range(7000)], minlength=4)
    np.testing.assert_allclose(draws / 7000, [6 / 14, 5 / 14, 3 / 14, 0], atol=0.024)
    assert draws[3] == 0
    # Temperature 0.25: p ∝ N^4, 1296 : 625 : 81, so action 0 takes 1296 / 2002 = 0.647.
    draws = [probe.pick(counts, legal, "temperature", 0.25, rng) for _ in range(7000)]
    assert np.mean(np.array(draws) == 0) == pytest.approx(1296 / 2002, abs=0.023)
    # `larger` is evaluation's own rule (`softmax_sample` at temperature 0 over the legal actions'
    # (count, action) pairs), on counts drawn from 0..3 so that ties are frequent.
    from muzero.search.reference import softmax_sample

    for _ in range(200):
        counts, legal = rng.integers(0, 4, size=5), rng.random(5) < 0.7
        legal[rng.integers(5)] = True
        pairs = [(int(counts[a]), int(a)) for a in np.flatnonzero(legal)]
        assert probe.pick(counts, legal, "larger", 0.0, rng) == softmax_sample(pairs, 0.0, None)
    # The `prior` rule: the prior's largest, ties to the larger action. Priors 1/4, 1/2, 1/4 and
    # 0 on an illegal action: action 1; 0.4, 0.2, 0.4, 0: actions 0 and 2 tie, so 2.
    legal = np.array([True, True, True, False])
    assert probe.tie_counts(np.array([0.25, 0.5, 0.25, 0.0]), legal)[1] == 1
    assert probe.tie_counts(np.array([0.4, 0.2, 0.4, 0.0]), legal)[1] == 2


def test_probe_greedy_plays_a_run(tiny_run, tmp_path, capsys):
    probe = load_script("probe_greedy")
    argv = ["--run", str(tiny_run), "--episodes", "2", "--moves", "5", "--simulations", "3"]
    probe.main([*argv, "--rules", "larger", "noise", "selfplay", "prior"])
    header, *lines = capsys.readouterr().out.splitlines()
    assert header == f"{tiny_run}: 3 simulations a search"
    # One line per rule; CartPole lasts 8 moves or more, so 2 games x 5 moves = 10 searches each,
    # and a reward of 1 a move: a return of 5 in each game.
    assert [line.split(" (")[0] for line in lines] == ["larger", "noise", "selfplay", "prior"]
    for line in lines:
        assert "checkpoint at step 30" in line and "return 5.00 (std 0.00, 2 games)" in line
        assert "of 10 searches" in line
        for field in ("moves per action ", "mean prior "):  # both over CartPole's two actions
            shares = line.split(field)[1].split(" |")[0].split(" / ")
            assert float(shares[0]) + float(shares[1]) == pytest.approx(1.0, abs=0.002)
    # `prior` plays the prior's largest at every move, by definition.
    assert "the prior's largest in 1.000" in lines[3]
    # Bad input: argparse's one line and status 2.
    for argv, message in (
        (["--run", str(tmp_path)], "config.yaml: file not found"),
        (["--run", str(tiny_run), "--rules", "argmax"], "--rules: unknown rule 'argmax'"),
        (["--run", str(tiny_run), "--rules", "temperature:x"], "--rules: unknown rule 'temperature:x'"),
        (["--run", str(tiny_run), "--moves", "0"], "--moves: expected at least 1, got 0"),
        (["--run", str(tiny_run), "--simulations", "0"], "--simulations: expected at least 1, got 0"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            probe.main(argv)
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_probe_model_returns_rows_and_agreement_by_hand():
    probe = load_script("probe_model")
    # Path 0 takes 3 actions rewarded 1, path 1 one; discount 0.5. Path 0: z_2 = 1,
    # z_1 = 1 + 0.5 * 1 = 1.5, z_0 = 1 + 0.5 * 1.5 = 1.75, z_3 = z_4 = 0; path 1: z_0 = 1, then 0.
    rewards = np.array([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    lengths = np.array([3, 1])
    real = probe.returns_to_go(rewards, lengths, 0.5)
    np.testing.assert_allclose(real, [[1.75, 1.5, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0]])
    # Model values [2, 1, 0] and [1, 0, 0]; near = 1 action from the end; both games ended.
    model = np.array([[2.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    rows = probe.depth_rows(model, real[:, :3], lengths, np.array([True, True]), near=1)
    # k = 0: both paths (0 <= length); real mean (1.75 + 1) / 2, model (2 + 1) / 2, squared error
    # (0.25^2 + 0) / 2; near the end: path 1 only (1 - 0 <= 1), real 1 and model 1.
    np.testing.assert_allclose(rows[0], [2, 1.375, 1.5, 0.03125, 1, 1.0, 1.0])
    # k = 1: both (path 1's state after its last action counts, worth 0); error (0.5^2 + 0) / 2;
    # near: path 1 (1 - 1 = 0), real 0 and model 0.
    np.testing.assert_allclose(rows[1], [2, 0.75, 0.5, 0.125, 1, 0.0, 0.0])
    # k = 2: path 0 only, real 1 against model 0; near (3 - 2 = 1).
    np.testing.assert_allclose(rows[2], [1, 1.0, 0.0, 1.0, 1, 1.0, 0.0])
    # Path 1 cut by the time limit instead of ended: never near the end, so nothing is at k = 0 and 1.
    cut = probe.depth_rows(model, real[:, :3], lengths, np.array([True, False]), near=1)
    np.testing.assert_allclose(cut[:, 4], [0, 0, 1])
    assert np.isnan(cut[:2, 5:]).all() and list(cut[2, 5:]) == [1.0, 0.0]
    np.testing.assert_allclose(cut[:, :4], rows[:, :4])  # the other columns do not depend on it
    # Roots 0 / 1 / 2 / 3 with real Qs (5, 3) / (4, 4.5) / (1, 9) / (0, 5): root 1's differ by 0.5,
    # not counted; root 0's model (1, 2) picks action 1 against the real 0; root 2's (3, 4) agrees;
    # root 3's model ties (2, 2) and, as the search, takes the larger action, 1: it agrees. 2 of 3.
    index = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    real_q, model_q = np.array([5, 3, 4, 4.5, 1, 9, 0, 5.0]), np.array([1, 2, 0, 1, 3, 4, 2, 2.0])
    assert probe.root_agreement(index, model_q, real_q) == (3, 2 / 3)
    # A tree: the root's children a (3 visits) and b (1); a's child c (2), c's child d (1), and an
    # unvisited child of b. Its 4 simulations reached a, c, d and b: depths 1, 2, 3, 1, a mean of
    # 7 / 4 = the visits below the root (3 + 1 + 2 + 1) over the root's children's (4).
    from muzero.search.reference import Node

    root, a, b, c, d = (Node(0.5) for _ in range(5))
    root.children, a.children, b.children, c.children = {0: a, 1: b}, {0: c}, {0: Node(0.5)}, {1: d}
    a.visit_count, b.visit_count, c.visit_count, d.visit_count = 3, 1, 2, 1
    assert probe.tree_depths(root) == (3, 1.75)
    # Roots 0 / 1 / 2 with the real returns of actions (0, 1): (10, 20) / (30, 5) / (7, 7.5). The
    # search played 1 / 1 / 0, the head's largest was 0 / 1 / 1: roots 0 and 2 differ. There the
    # search's moves return 20 and 7 (mean 13.5), the head's 10 and 7.5 (mean 8.75); root 0's
    # search move is better by 10 (> 1), root 2's worse by 0.5 (not > 1): 1 / 2 better, 0 worse.
    index, first = np.array([0, 0, 1, 1, 2, 2]), np.array([0, 1, 0, 1, 0, 1])
    real_q = np.array([10, 20, 30, 5, 7, 7.5])
    assert probe.overrule(index, first, np.array([1, 1, 0]), np.array([0, 1, 1]), real_q) == (2, 13.5, 8.75, 0.5, 0.0)
    none = probe.overrule(index, first, np.array([1, 0, 0]), np.array([1, 0, 0]), real_q)  # none differ
    assert none[0] == 0 and np.isnan(none[1:]).all()
    # A difference of exactly 1 is neither better nor worse: root 0's actions return (10, 11), the
    # search played 1 and the head 0, so 11 against 10: not more than 1 better.
    assert probe.overrule(index[:2], first[:2], np.array([1]), np.array([0]), np.array([10, 11.0])) == (1, 11, 10, 0, 0)
    # The head's largest, ties to the larger action: [1, 3, 3] -> 2, [5, 1, 0] -> 0, [2, 2, 2] -> 2.
    assert list(probe.head_actions(np.array([[1, 3, 3], [5, 1, 0], [2, 2, 2.0]]))) == [2, 0, 2]


class _Countdown:
    """A game that ends at move `end`; its observation is the move number."""

    def __init__(self, moves: int, end: int):
        self.moves, self.end = moves, end

    def step(self, action):
        self.moves += 1
        return np.array([float(self.moves)], np.float32), 1.0, self.moves >= self.end, False


class _Model:
    """initial_inference: value and hidden state the observation, policy favouring action 1;
    recurrent_inference: hidden state 10 h + a + 1 (the actions written as digits), valued as
    itself, reward 0.5."""

    def initial_inference(self, observation):
        x = np.asarray(observation, np.float64)[:, 0]
        return SimpleNamespace(value=x, hidden_state=x, policy_logits=np.tile([0.0, 1.0], (len(x), 1)))

    def recurrent_inference(self, hidden_state, action):
        h = np.asarray(hidden_state) * 10 + np.asarray(action) + 1
        return SimpleNamespace(value=h, hidden_state=h, reward=np.full(len(h), 0.5))


def test_probe_model_paths_and_unrolls_with_a_scripted_game():
    probe = load_script("probe_model")
    legal = np.array([0, 1])
    # Root 0 at move 0 of a game that ends at move 3; root 1 at move 8 of one that would end at
    # 20, but self-play cuts games at max_moves = 10, so its paths stop after 2 actions, not ended.
    roots = [(_Countdown(0, 3), None, 0, legal, 0), (_Countdown(8, 20), None, 1, legal, 8)]
    index, first, actions, rewards, lengths, ended = probe.real_paths(_Model(), roots, 2, 10)
    assert list(index) == [0, 0, 1, 1] and list(first) == [0, 1, 0, 1]
    # Each path takes its first action, then the policy's largest (always 1); 0 past its end.
    np.testing.assert_array_equal(actions, [[0, 1, 1], [1, 1, 1], [0, 1, 0], [1, 1, 0]])
    np.testing.assert_array_equal(rewards, [[1, 1, 1], [1, 1, 1], [1, 1, 0], [1, 1, 0]])
    assert list(lengths) == [3, 3, 2, 2] and list(ended) == [True, True, False, False]
    assert roots[0][0].moves == 0  # the roots' games are copied, not played on
    # The model along actions (1, 0) from observation 0 and (0, 1) from 1: hidden states
    # 0 -> 2 -> 21 and 1 -> 11 -> 112, so values [0, 2, 21] and [1, 11, 112]; the first
    # action's Q = 0.5 + 0.5 * v_1 at discount 0.5: 1.5 and 6.0.
    values, q = probe.model_values(_Model(), np.array([[0.0], [1.0]]), np.array([[1, 0, 9], [0, 1, 9]]), 2, 0.5)
    np.testing.assert_allclose(values, [[0, 2, 21], [1, 11, 112]])
    np.testing.assert_allclose(q, [1.5, 6.0])


def test_probe_model_reads_a_run(tiny_run, tictactoe_tiny_run, tmp_path, capsys):
    probe = load_script("probe_model")
    probe.main(["--run", str(tiny_run), "--episodes", "2", "--every", "3", "--depth", "2", "--near", "5"])
    header, depth, agreement, differs, *rest = capsys.readouterr().out.splitlines()
    roots, paths = (int(header.split(": ")[1].split(" roots, ")[0]), int(header.split(", ")[1].split(" real")[0]))
    assert header.startswith(f"{tiny_run} at training step 30: ") and paths == 2 * roots  # CartPole: 2 actions
    # tiny.yaml searches with 4 simulations: its tree is at least 1 deep and at most 4.
    deepest, reached = float(depth.split("depth ")[1].split(" on")[0]), float(depth.split("depth ")[2].split(" on")[0])
    assert depth.startswith("the search's tree at the roots (4 simulations)") and 1 <= reached <= deepest <= 4
    assert agreement.startswith("the model's Q picks the real paths' best root action at ")
    assert differs.startswith("the search's move differs from the policy head's at ")
    assert int(differs.split(" at ")[1].split(" of ")[0]) <= roots
    # Two greedy games, each with its length (at most tiny.yaml's 50 moves) and CartPole's 4 numbers.
    games = [line for line in rest if line.startswith("a greedy game: ")]
    moves = [int(g.split(": ")[1].split(" moves")[0]) for g in games]
    assert len(games) == 2 and all(1 <= m <= 50 for m in moves)
    # A root at moves 0, 3, 6, ... of each game while it lasts: ceil(moves / 3) per game.
    assert roots == sum(-(-m // 3) for m in moves)
    for game, m in zip(games, moves):
        x, _, angle, _ = (float(v) for v in game.split("[")[1].rstrip("]").split())  # CartPole's 4 numbers
        if m < 50:  # ended before tiny.yaml's max_moves: the cart left the track or the pole fell
            assert abs(x) >= 2.4 or abs(angle) >= 0.209  # CartPole's ends (2.4, 0.2095 rad), printed to 3 decimals
    tables = [rest[i + 3 : i + 6] for i, line in enumerate(rest) if line.startswith("first action")]
    assert len(tables) == 2 and all(len(table) == 3 for table in tables)  # depths 0, 1, 2
    played, other = ([cell.strip() for cell in row.split("|")[1:-1]] for row in (tables[0][0], tables[1][0]))
    # k = 0 is the root itself in both: one state per root each, the same model value (the root's),
    # and every real path earns CartPole's reward of 1 for its first action, so it is worth 1 or more.
    assert int(played[1]) == int(other[1]) == roots and played[3] == other[3]
    assert float(played[2]) >= 1 and float(other[2]) >= 1
    for argv, message in (
        (["--run", str(tmp_path)], "config.yaml: file not found"),
        (["--run", str(tiny_run), "--depth", "0"], "--depth: expected at least 1, got 0"),
        (["--run", str(tiny_run), "--depth", "51"], "--depth: at most game.max_moves (50), got 51"),
        (["--run", str(tictactoe_tiny_run)], "this probe reads one-player games"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            probe.main(argv)
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


class _LopsidedModel:
    """A model of a 2-action game with a flat state: v = 10 + x[0]; action 0 adds 1 to x[0], action
    1 takes 1 away, with reward 1; the policy's logits are [x[0], 0]."""

    def initial_inference(self, observations):
        from muzero.networks.base import NetworkOutput

        h = np.asarray(observations, np.float64)
        logits = np.stack([h[:, 0], np.zeros(len(h))], axis=1)
        return NetworkOutput(10 + h[:, 0], np.zeros(len(h)), logits, h)

    def recurrent_inference(self, hidden_state, actions):
        from muzero.networks.base import NetworkOutput

        h = np.array(hidden_state, np.float64)
        h[:, 0] += np.where(np.asarray(actions) == 0, 1.0, -1.0)
        return NetworkOutput(10 + h[:, 0], np.ones(len(h)), np.zeros((len(h), 2)), h)


def test_probe_symmetry_gaps_by_hand():
    from muzero.symmetries import mirror_symmetries

    probe = load_script("probe_symmetry")
    _, mirror = mirror_symmetries(2, (1, 0))  # x -> -x, actions swapped
    observations = np.array([[0.0, 0.0], [0.5, 2.0]], np.float32)
    np.testing.assert_array_equal(probe.apply_symmetry(observations, mirror), [[0.0, 0.0], [-0.5, -2.0]])
    model, discount = _LopsidedModel(), 0.5
    readings = probe.model_readings(model, observations, discount)
    # Q(x, 0) = 1 + 0.5 (10 + x0 + 1), Q(x, 1) = 1 + 0.5 (10 + x0 - 1): at x0 = 0.5, 6.75 and 5.75.
    np.testing.assert_allclose(readings[1], [[6.5, 5.5], [6.75, 5.75]])
    image = probe.model_readings(model, probe.apply_symmetry(observations, mirror), discount)
    gaps = probe.mirror_gaps(readings, image, mirror.action)
    # |v - v'| = |2 x0|: 0 and 1. Q's image, mapped: Q(-x, 1) = 1 + 0.5 (9 - x0) against Q(x, 0),
    # a gap of 0.5 |2 x0 + 2|; Q(-x, 0) against Q(x, 1), 0.5 |2 x0 - 2|: at x0 = 0, (1 + 1) / 2 = 1;
    # at 0.5, (1.5 + 0.5) / 2 = 1. The policy, softmax([x0, 0]) against softmax([-x0, 0]) mapped,
    # is symmetric: gap 0. At x0 = 0 the model prefers action 0 (6.5) and, on the same state, its
    # image's largest is action 0 too, which maps to 1: a disagreement. At 0.5 also.
    np.testing.assert_allclose(gaps["value"], [0.0, 1.0])
    np.testing.assert_allclose(gaps["q"], [1.0, 1.0])
    np.testing.assert_allclose(gaps["policy"], [0.0, 0.0], atol=1e-12)
    assert gaps["disagree"].tolist() == [True, True]


def test_probe_symmetry_reads_a_run(tiny_run, tictactoe_tiny_run, capsys):
    probe = load_script("probe_symmetry")
    probe.main(["--run", str(tiny_run), "--episodes", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{tiny_run} at training step 30:") and "of 2 games" in lines[0]
    assert lines[1].startswith("symmetry 1 (actions (1, 0)): mean |v - v'| ")
    # At the all-zero observation, its own image, the Q gap is |Q(0) - Q(1)|.
    q = [float(x) for x in lines[2].split(", Q ")[1].split(", policy")[0].split(" / ")]
    gap = float(lines[2].split("mean |Q - Q'| ")[1].split(",")[0])
    assert gap == pytest.approx(abs(q[0] - q[1]), abs=0.02)  # three numbers each rounded to 2 decimals
    # A two-player game: argparse's one line and status 2.
    with pytest.raises(SystemExit) as exit_info:
        probe.main(["--run", str(tictactoe_tiny_run)])
    assert exit_info.value.code == 2 and "a known symmetry" in capsys.readouterr().err


def test_probe_tactics_classifies_positions_by_hand():
    import pyspiel

    probe = load_script("probe_tactics")
    game, after = pyspiel.load_game("tic_tac_toe"), tictactoe_after

    # Cells 0-8 row by row. X on 0 and 1, O on 3 and 4, X to move: 2 completes the top row
    # (O's 5 threat does not matter, X wins first).
    assert probe.classify(after(0, 3, 1, 4)) == ("win", [2])
    # X on 0 and 1, O on 4, O to move: no win for O; only 2 stops X's top row.
    assert probe.classify(after(0, 4, 1)) == ("defend", [2])
    # The empty board: no win, every move safe.
    assert probe.classify(after()) is None
    # A random mover's right share: 1 of 5 legal moves (the first), 1 of 6 (the second).
    rows = [([0, 3, 1, 4], [2], after(0, 3, 1, 4).legal_actions()), ([0, 4, 1], [2], after(0, 4, 1).legal_actions())]
    assert probe.random_share(rows) == pytest.approx((1 / 5 + 1 / 6) / 2)
    # A played game walked move by move: X 0, O 3, X 1 (O must block 2), O 4 (X wins at 2), X 2.
    found = probe.collect_positions(game, 10, seed=0, played=[[0, 3, 1, 4, 2]])
    assert [(moves, right) for moves, right, _ in found["defend"]] == [([0, 3, 1], [2])]
    assert [(moves, right) for moves, right, _ in found["win"]] == [([0, 3, 1, 4], [2])]


def test_probe_tactics_reads_a_run(tictactoe_tiny_run, capsys):
    probe = load_script("probe_tactics")
    probe.main(["--run", str(tictactoe_tiny_run), "--positions", "6", "--opponents", "perfect"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].count("(6 positions)") == 2, lines[1]  # 6 of each kind
    shares = {line.split("|")[1].strip(): [float(x) for x in line.split("|")[2:4]] for line in lines[3:7]}
    # The model's table: a row for each kind, rewards and values on the 3 bins' -1..1.
    assert [line.split("|")[1].strip() for line in lines[-2:]] == list(probe.KINDS)
    assert all(-1.0 <= float(x) <= 1.0 for line in lines[-2:] for x in line.split("|")[2:6])
    assert list(shares) == ["the run's search", "its prior alone", "perfect", "random (expected)"]
    assert all(0.0 <= share <= 1.0 for row in shares.values() for share in row)
    # The random row is the expectation over the same positions (the same seed draws them).
    import pyspiel

    found = probe.collect_positions(pyspiel.load_game("tic_tac_toe"), 6, 0)
    assert shares["random (expected)"] == pytest.approx(
        [probe.random_share(found[kind]) for kind in probe.KINDS], abs=5e-4
    )
    # From the run's own games: its replay holds more than 6 positions of each kind.
    probe.main(["--run", str(tictactoe_tiny_run), "--positions", "6", "--opponents", "--from-replay"])
    lines = capsys.readouterr().out.splitlines()
    assert "replay's games" in lines[0] and lines[1].count("(6 positions)") == 2 and len(lines) == 12, lines


def test_probe_tactics_refuses_bad_input_in_one_line(tiny_run, tictactoe_tiny_run, tmp_path, capsys):
    probe = load_script("probe_tactics")
    for argv, fragment in (
        (["--run", str(tiny_run)], "only for two-player board games (game.id openspiel:...), not CartPole-v1"),
        (["--run", str(tictactoe_tiny_run), "--opponents", "mcts"], "unknown opponent 'mcts'"),
        (["--run", str(tictactoe_tiny_run), "--simulations", "0"], "--simulations: expected at least 1, got 0"),
        (["--run", str(tmp_path / "missing")], "missing/config.yaml: file not found"),
    ):
        with pytest.raises(SystemExit) as stop:
            probe.main(argv)
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert stop.value.code == 2 and fragment in error, error


def test_probe_tactics_one_step_by_hand():
    from types import SimpleNamespace

    probe = load_script("probe_tactics")

    class OneStep:
        """Reward 1 for action 2, else 0; the value after action a is a / 10; 3 actions."""

        def initial_inference(self, observations, training=False):
            return SimpleNamespace(policy_logits=np.zeros((len(observations), 3)), hidden_state=observations)

        def recurrent_inference(self, hidden_state, actions, training=False):
            return SimpleNamespace(reward=(actions == 2).astype(float), value=actions / 10)

    # Position 1: moves 0, 1, 2 legal, 2 right (reward 1, value 0.2), 0 and 1 other (rewards 0
    # and 0, values 0 and 0.1). Position 2: 0 and 2 legal, 0 right (reward 0, value 0), 2 other
    # (reward 1, value 0.2). Right: rewards 1, 0 (mean 0.5), values 0.2, 0 (0.1); other: rewards
    # 0, 0, 1 (1/3), values 0, 0.1, 0.2 (0.1).
    rows = [([], [2], [0, 1, 2]), ([], [0], [0, 2])]
    means = probe.one_step(OneStep(), np.zeros((2, 1)), rows)
    assert means == pytest.approx(
        {"reward, right": 0.5, "reward, other": 1 / 3, "value after, right": 0.1, "value after, other": 0.1}
    )
