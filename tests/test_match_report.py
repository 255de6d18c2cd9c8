"""muzero/match_report.py: `evaluate --opponent`'s table, printed and written as CSV."""

from __future__ import annotations

import csv

from muzero.arena import MatchResult
from muzero.match_report import match_csv_path, match_table, write_match_csv

# 4 games as the first player (3 won, 1 drawn) and 4 as the second (1 won, 1 drawn, 2 lost).
RESULT = MatchResult(counts={"first": {"win": 3, "draw": 1, "loss": 0}, "second": {"win": 1, "draw": 1, "loss": 2}})


def test_the_table_has_a_line_per_side_and_the_score():
    lines = match_table(RESULT, "mcts:10", step=30, simulations=7).splitlines()
    assert lines[0] == "MuZero (checkpoint at training step 30, 7 simulations per move) against mcts:10, 8 games:"
    assert lines[1].split() == ["side", "games", "win", "draw", "loss"]
    assert lines[2].split() == ["first", "4", "3", "1", "0"]
    assert lines[3].split() == ["second", "4", "1", "1", "2"]
    # Wins 3 + 1 = 4, draws 1 + 1 = 2: score (4 + 0.5 * 2) / 8 = 0.625.
    assert lines[4].split()[:5] == ["total", "8", "4", "2", "2"] and "score 0.625" in lines[4]


def test_the_csv_has_a_row_per_side_in_the_run_folder_by_default(tmp_path):
    path = match_csv_path(tmp_path, "mcts:10")
    assert path == tmp_path / "match-mcts_10.csv"
    write_match_csv(path, RESULT, "mcts:10", step=30, simulations=7)
    rows = list(csv.DictReader(path.open()))
    assert [row["side"] for row in rows] == ["first", "second"]
    assert rows[1] == {
        "training_step": "30",
        "simulations": "7",
        "opponent": "mcts:10",
        "side": "second",
        "games": "4",
        "win": "1",
        "draw": "1",
        "loss": "2",
    }
