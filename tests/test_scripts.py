"""The scripts run (tiny settings), so they do not rot."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers import load_script

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
    assert (point["training_step"], point["opponent"]) == (20, "random")
    assert point["win"] + point["draw"] + point["loss"] == 1.0
    assert point["score"] == point["win"] + 0.5 * point["draw"]
    bench.plot([point, dict(point, opponent="perfect")], tmp_path / "score.png", "test")
    assert (tmp_path / "score.png").stat().st_size > 10_000


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


def test_bench_boardgames_reads_measured_seeds_and_stops_at_a_partial_one(tmp_path, monkeypatch):
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
    # A folder without its final matches (an interrupted run) stops the benchmark, naming it.
    (tmp_path / "tictactoe_seed1").mkdir()
    monkeypatch.setattr(sys, "argv", [*argv[:-1], "1"])
    with pytest.raises(SystemExit, match="tictactoe_seed1: a run without all its final matches"):
        bench.main()
    assert trained == []


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
