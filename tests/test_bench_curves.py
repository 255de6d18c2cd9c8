"""The yardsticks the benchmark scripts draw: DQN's MinAtar curves (scripts/bench_minatar.py)
and the cells of the Gumbel grid (scripts/bench_gumbel.py)."""

from __future__ import annotations

import pytest

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


def test_gumbel_grid_runs_the_named_cells_first():
    bench = load_script("bench_gumbel")
    cells = bench.cells([2, 4, 16], ["gumbel4", "puct16"])
    # Every (algorithm, budget) once: 2 algorithms x 3 budgets; the target comparison first.
    assert sorted(cells) == sorted((a, b) for a in ("puct", "gumbel") for b in (2, 4, 16))
    assert cells[:2] == [("gumbel", 4), ("puct", 16)]
    assert bench.cell_settings("gumbel", 4) == ["search.algorithm=gumbel", "search.num_simulations=4"]
