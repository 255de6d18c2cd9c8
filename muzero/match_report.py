"""`muzero evaluate --opponent`'s table: wins, draws and losses per side, printed and as CSV.

    MuZero (checkpoint at training step 300, 50 simulations per move) against random, 100 games:
    side      games   win  draw  loss
    first        50    48     2     0
    second       50    41     6     3
    total       100    89     8     3   score 0.930 (win 1, draw 0.5)

The CSV holds one row per side: training_step, simulations, opponent, side, games, win,
draw, loss, so the tables of several checkpoints or opponents concatenate.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import TYPE_CHECKING

from muzero.run_dir import write_atomically

if TYPE_CHECKING:
    from muzero.arena import MatchResult

CSV_HEADER = ["training_step", "simulations", "opponent", "side", "games", "win", "draw", "loss"]


def match_table(result: MatchResult, opponent: str, step: int, simulations: int) -> str:
    """The table as printed, one line per side and a total with the score.

    Args:
      result: `muzero.arena.play_match`'s outcomes.
      opponent: the opponent as given (`random`, `perfect`, `mcts:N`).
      step: the training step of the checkpoint that played.
      simulations: MuZero's simulations per move.
    """
    title = f"MuZero (checkpoint at training step {step}, {simulations} simulations per move) against "
    lines = [title + f"{opponent}, {result.games()} games:", f"{'side':<8}{'games':>7}{'win':>6}{'draw':>6}{'loss':>6}"]
    for _, side, games, win, draw, loss in result.rows(opponent):
        lines.append(f"{side:<8}{games:>7}{win:>6}{draw:>6}{loss:>6}")
    lines.append(
        f"{'total':<8}{result.games():>7}{result.total('win'):>6}{result.total('draw'):>6}"
        f"{result.total('loss'):>6}   score {result.score():.3f} (win 1, draw 0.5)"
    )
    return "\n".join(lines)


def match_csv_path(run_dir: Path, opponent: str) -> Path:
    """Where the table goes by default: RUN_DIR/match-<opponent>.csv (`mcts:N` as `mcts_N`)."""
    return run_dir / f"match-{opponent.replace(':', '_')}.csv"


def write_match_csv(path: Path, result: MatchResult, opponent: str, step: int, simulations: int) -> None:
    """Writes the table as CSV to `path`, all or nothing.

    Raises:
      OSError: the file cannot be written; `path` is as it was.
    """
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(CSV_HEADER)
    writer.writerows([step, simulations, *row] for row in result.rows(opponent))
    write_atomically(path, text.getvalue())
