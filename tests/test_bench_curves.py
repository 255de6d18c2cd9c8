"""The yardsticks the benchmark scripts draw: DQN's MinAtar curves (scripts/bench_minatar.py)
the cells of the Gumbel grid (scripts/bench_gumbel.py) and of the ablation (scripts/bench_ablation.py),
and how a cell that finished before is read."""

from __future__ import annotations

import pytest

from muzero.config_io import read_config
from tests.helpers import load_script


def test_dqn_at_interpolates_the_digitised_curve():
    bench = load_script("bench_minatar")
    # Breakout's points (0.25M, 6.7) and (0.5M, 8.3): halfway, 0.375M, is 7.5; the points themselves as they are.
    assert bench.dqn_at("breakout", 375_000) == pytest.approx(7.5)
    assert bench.dqn_at("breakout", 500_000) == pytest.approx(8.3)
    assert bench.dqn_at("space_invaders", 5_000_000) == pytest.approx(43.4)
    # Off the curve (before its first point, after 5M, or a game without one): no yardstick.
    assert bench.dqn_at("breakout", 50_000) is None
    assert bench.dqn_at("breakout", 6_000_000) is None
    assert bench.dqn_at("pong", 1_000_000) is None
    # Each curve rises to its 5M value in the order of its environment steps.
    for points in bench.DQN_CURVE.values():
        assert [steps for steps, _ in points] == sorted(steps for steps, _ in points)
        assert points[-1][0] == 5e6


def test_dqn_points_stop_at_the_first_point_past_the_runs():
    bench = load_script("bench_minatar")
    # Space Invaders' points are at 0.1M, 0.25M, 0.5M, 1M, ...: runs to 0.5M draw the first three
    # (the last of them exactly at 0.5M); runs to 0.3M draw up to 0.5M, the first point past them.
    assert bench.dqn_points("space_invaders", 500_000) == [(1e5, 16.1), (2.5e5, 21.7), (5e5, 27.9)]
    assert bench.dqn_points("space_invaders", 300_000)[-1] == (5e5, 27.9)
    # A run to 500k stops at its first evaluation past it (500,080 moves): 500k is within 1%, so
    # the curve still ends there, not at 1M; 510k is 2% past it and reaches on to 1M.
    assert bench.dqn_points("space_invaders", 500_080)[-1] == (5e5, 27.9)
    assert bench.dqn_points("space_invaders", 510_000)[-1] == (1e6, 32.8)
    # Runs past 5M draw the whole curve; runs shorter than its first point draw that point.
    assert bench.dqn_points("breakout", 6e6) == bench.DQN_CURVE["breakout"]
    assert bench.dqn_points("breakout", 0) == [(1e5, 4.3)]


def test_gumbel_grid_runs_the_named_cells_first():
    bench = load_script("bench_gumbel")
    cells = bench.cells([2, 4, 16], ["gumbel4", "puct16"])
    # Every (algorithm, budget) once: 2 algorithms x 3 budgets; the target comparison first.
    assert sorted(cells) == sorted((a, b) for a in ("puct", "gumbel") for b in (2, 4, 16))
    assert cells[:2] == [("gumbel", 4), ("puct", 16)]
    # In the order given, not the grid's (puct16 would come after gumbel2 by budget).
    assert bench.cells([2, 4, 16], ["puct16", "gumbel2"])[:2] == [("puct", 16), ("gumbel", 2)]
    assert bench.cell_settings("gumbel", 4) == ["search.algorithm=gumbel", "search.num_simulations=4"]


def test_ablation_cells_are_each_option_alone_and_all_together():
    bench = load_script("bench_ablation")
    options = [name for name in bench.CELLS if name not in ("baseline", "together", *bench.OTHERS, *bench.DIAGNOSTICS)]
    assert bench.CELLS["baseline"] == []
    # "together" is the union of the single-option cells' overrides, each once.
    together = bench.CELLS["together"]
    assert sorted(together) == sorted(s for name in options for s in bench.CELLS[name])
    assert len(set(together)) == len(together)
    # The diagnostic cell is the reanalyse cell with the baseline's 10-step horizon; "together"
    # keeps the paper's 5.
    assert bench.CELLS["reanalyse_td10"] == [*bench.CELLS["reanalyse"], "reanalyse.td_steps=10"]
    assert "reanalyse.td_steps=10" not in together
    # The other diagnostic is "together" less Reanalyse's two overrides (fraction 0.8 and
    # 10 positions per step), and nothing else taken away.
    without = bench.CELLS["together_without_reanalyse"]
    assert sorted(without + ["reanalyse.fraction=0.8", "reanalyse.positions_per_step=10"]) == sorted(together)
    # And "together" with the 10-step horizon added; read as configs, the first turns Reanalyse
    # off (fraction 0, the default) and the second moves θ⁻'s horizon from the default 5 to 10.
    assert bench.CELLS["together_td10"] == [*together, "reanalyse.td_steps=10"]

    def config(name):
        return read_config(bench.BREAKOUT, bench.cell_settings(name)).config

    without_reanalyse = config("together_without_reanalyse")
    assert without_reanalyse.reanalyse.fraction == 0.0
    assert without_reanalyse.train.steps_per_move == pytest.approx(0.2)
    assert config("together").reanalyse.td_steps == 5
    assert config("together_td10").reanalyse.td_steps == 10
    # Each cell starts from the config as the ablation measured it, 0.1 steps per move, though
    # the shipped config now has more_training's 0.2: the baseline cell is still the 0.1 run.
    assert bench.steps_per_move(bench.BREAKOUT, []) == pytest.approx(0.2)
    assert bench.steps_per_move(bench.BREAKOUT, bench.cell_settings("baseline")) == pytest.approx(0.1)
    # more_training doubles it, so its run to 500k env steps trains 100,000 steps where the
    # others train 50,000; the cell's own override comes after the base and wins.
    assert bench.steps_per_move(bench.BREAKOUT, bench.cell_settings("more_training")) == pytest.approx(0.2)
    assert bench.steps_per_move(bench.BREAKOUT, bench.cell_settings("more_training_x3")) == pytest.approx(0.3)
    # Every cell's overrides name config keys that exist (a typo would only fail an hour in).
    for name in bench.CELLS:
        read_config(bench.BREAKOUT, bench.cell_settings(name))  # raises ConfigError naming the key


def test_ablation_reads_the_first_evaluation_at_or_past_each_mark():
    bench = load_script("bench_ablation")
    points = [{"env_steps": e, "mean_return": r} for e, r in ((98_000, 1.0), (101_500, 2.0), (260_000, 3.0))]
    # 100k: 98k is short of it, 101.5k is the first past it; 250k: 260k; 500k: never reached.
    assert bench.at_marks(points) == [(2.0, 101_500), (3.0, 260_000), None]


def test_ablation_late_mean_averages_the_evaluations_from_300k_to_the_last_mark():
    bench = load_script("bench_ablation")
    steps = (251_000, 301_000, 352_000, 400_000, 501_000, 551_000)
    points = [{"env_steps": e, "mean_return": r} for e, r in zip(steps, (1.0, 2.0, 4.0, 6.0, 8.0, 100.0))]
    # 301k, 352k, 400k and 501k (the first at or past 500k) count; 251k and 551k do not:
    # (2 + 4 + 6 + 8) / 4 = 5.
    assert bench.late_mean(points) == 5.0
    # A run that stopped before 500k has no such mean.
    assert bench.late_mean(points[:4]) is None


def test_ablation_table_adds_the_seeds_mean_and_its_standard_error():
    bench = load_script("bench_ablation")
    rows = []
    for seed, returns in ((0, (2.0, 4.0, 5.0, 6.0)), (1, (4.0, 6.0, 8.0, 9.0))):
        for steps, value in zip((101_000, 251_000, 400_000, 501_000), returns):
            rows.append(
                {"cell": "baseline", "seed": seed, "env_steps": steps, "mean_return": value, "wall_seconds": 60}
            )
    mean_row = [line for line in bench.table(rows, ["baseline"], [0, 1]).splitlines() if "mean of 2" in line]
    # At 100k: (2 + 4) / 2 = 3, standard error stdev / sqrt(2) = sqrt(2) / sqrt(2) = 1. At 500k: 7.5 and
    # sqrt(4.5) / sqrt(2) = 1.5. Late means (400k and 501k): 5.5 and 8.5, so 7.00 ± 1.50.
    assert "3.00 ± 1.00" in mean_row[0] and "7.50 ± 1.50" in mean_row[0] and "7.00 ± 1.50" in mean_row[0]
    # One seed: no mean row.
    assert "| baseline | mean of" not in bench.table(rows, ["baseline"], [0])
    # A seed that stopped short has no figure at 500k, so the seeds' mean there is left out.
    assert bench.mean_and_error([6.0, None]) == "-"


def test_ablation_read_only_leaves_out_cells_not_kept_and_trains_nothing(tmp_path, monkeypatch, capsys):
    import argparse

    bench = load_script("bench_ablation")
    monkeypatch.setattr(bench, "train_kept", lambda *a, **k: pytest.fail("trained a cell"))
    args = argparse.Namespace(
        keep=tmp_path / "kept",
        out=tmp_path / "runs",
        env_steps=500_000,
        eval_every=50_000,
        episodes=100,
        read_only=True,
    )
    assert bench.run_cell("baseline", 1, args) == []
    assert "baseline_seed1: not kept, left out" in capsys.readouterr().out


def test_train_to_reads_a_finished_run_instead_of_running_it(tmp_path, monkeypatch, capsys):
    bench = load_script("bench_minatar")
    (tmp_path / "eval.csv").write_text("training_step,env_steps\n2500,25000\n5000,50000\n")
    monkeypatch.setattr(bench.subprocess, "run", lambda *a, **k: pytest.fail("ran a finished run"))
    bench.train_to(tmp_path / "config.yaml", tmp_path, 0, [], 5000)
    assert "finished before, read" in capsys.readouterr().out
    # One step short of the end: the run folder exists, so it resumes (its own config).
    commands = []
    monkeypatch.setattr(bench.subprocess, "run", lambda command, **k: commands.append(command))
    bench.train_to(tmp_path / "config.yaml", tmp_path, 0, [], 5001)
    assert commands[0][2:] == ["muzero.cli", "train", "--resume", str(tmp_path)]


def test_train_kept_reads_the_kept_copy_and_keeps_a_finished_run(tmp_path, monkeypatch):
    bench = load_script("bench_minatar")
    run_dir, kept = tmp_path / "runs" / "cell", tmp_path / "docs" / "cell"

    def train(command, **kwargs):  # a run that writes its folder's eval.csv and config.yaml
        run_dir.mkdir(parents=True)
        (run_dir / "eval.csv").write_text("training_step,env_steps\n5000,50000\n")
        (run_dir / "config.yaml").write_text("run: {seed: 0}\n")

    monkeypatch.setattr(bench.subprocess, "run", train)
    bench.train_kept(tmp_path / "config.yaml", run_dir, kept, 0, [], 5000)
    assert (kept / "eval.csv").read_text() == (run_dir / "eval.csv").read_text()
    assert (kept / "config.yaml").is_file()
    # A later session: runs/ is empty, the kept copy is read and nothing runs.
    monkeypatch.setattr(bench.subprocess, "run", lambda *a, **k: pytest.fail("ran a kept run"))
    bench.train_kept(tmp_path / "config.yaml", tmp_path / "empty" / "cell", kept, 0, [], 5000)


def test_ablation_seed_means_average_each_evaluation_over_the_seeds():
    bench = load_script("bench_ablation")
    rows = [
        {"cell": "a", "seed": 0, "env_steps": 50_000, "mean_return": 1.0},
        {"cell": "a", "seed": 0, "env_steps": 100_000, "mean_return": 3.0},
        {"cell": "a", "seed": 1, "env_steps": 51_000, "mean_return": 3.0},
        {"cell": "a", "seed": 1, "env_steps": 101_000, "mean_return": 7.0},
        {"cell": "a", "seed": 1, "env_steps": 150_000, "mean_return": 9.0},  # seed 0 stopped before
        {"cell": "b", "seed": 0, "env_steps": 50_000, "mean_return": 5.0},
    ]
    # First evaluations: mean (1 + 3) / 2 = 2 at 50.5k; sample std sqrt(2), over sqrt(2) seeds: 1.
    # Second: (3 + 7) / 2 = 5 at 100.5k; std sqrt(8) / sqrt(2) = 2. The third, seed 1's alone, is left out.
    assert bench.seed_means(rows, "a") == [
        (50_500, pytest.approx(2.0), pytest.approx(1.0)),
        (100_500, pytest.approx(5.0), pytest.approx(2.0)),
    ]
    assert bench.seed_means(rows, "b") is None  # one seed: no mean to draw
