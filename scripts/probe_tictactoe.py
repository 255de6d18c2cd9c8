"""What a tic-tac-toe run's networks believe, against exact values: the value head and the opening.

    python scripts/probe_tictactoe.py --run runs/bench_boardgames/tictactoe_seed0

Reads the run's latest checkpoint and compares the value head's prediction (from the point
of view of the player to move) with the exact minimax value of every non-terminal
position of the game (4,520), grouped by what is on the board:

* win-now: the player to move can complete a line;
* double-threat: it cannot, and the opponent threatens two cells (lost);
* single-threat: the opponent threatens one cell;
* quiet: no line is one move from completion.

Then it prints the policy head's prior over the first move (does self-play's opening
collapse?). docs/boardgames.md ("What made the difference") quotes both.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
CATEGORIES = ("win-now", "double-threat", "single-threat", "quiet")


def threats(cells: str, mark: str) -> set[int]:
    """Empty cells that would complete a line of `mark` ("x" or "o") on the 9-character board."""
    return {c for line in LINES for c in line if cells[c] == "." and sum(cells[i] == mark for i in line) == 2}


def category(cells: str, mover: int) -> str:
    me, them = ("x", "o") if mover == 0 else ("o", "x")
    if threats(cells, me):
        return "win-now"
    return ("quiet", "single-threat", "double-threat")[min(len(threats(cells, them)), 2)]


def positions(environment, perfect) -> list[tuple[np.ndarray, float, str]]:
    """(observation, exact value for the mover, category) of every non-terminal position."""
    found, seen = [], set()

    def visit(state) -> None:
        key = str(state)
        if key in seen or state.is_terminal():
            return
        seen.add(key)
        environment.state = state
        cells = "".join(key.split())
        found.append((environment.observation(), perfect.solve(state), category(cells, state.current_player())))
        for action in state.legal_actions():
            visit(state.child(action))

    visit(environment.game.new_initial_state())
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="a tic-tac-toe run folder")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from muzero.arena import board_game, make_opponent
    from muzero.evaluation import load_run

    config, _, network, step = load_run(args.run)
    environment = board_game(config.game, 0)
    found = positions(environment, make_opponent("perfect", environment.game, 0))
    values = np.asarray(network.initial_inference(np.stack([f[0] for f in found])).value).reshape(-1)
    exact = np.array([f[1] for f in found])
    kinds = np.array([f[2] for f in found])
    print(f"{args.run} at training step {step}: value head against exact values, {len(found)} positions")
    print("| position | exact value | positions | mean prediction | mean abs error |")
    print("| --- | --- | --- | --- | --- |")
    for kind in CATEGORIES:
        for value in (-1, 0, 1):
            rows = (kinds == kind) & (exact == value)
            if rows.any():
                error = np.abs(values[rows] - value).mean()
                print(f"| {kind} | {value:+d} | {rows.sum()} | {values[rows].mean():+.2f} | {error:.2f} |")
    environment.reset()
    logits = np.asarray(network.initial_inference(environment.observation()[None]).policy_logits)[0]
    prior = np.exp(logits - logits.max())
    print("prior over the first move (rows of the board):")
    for row in (prior / prior.sum()).reshape(3, 3):
        print("  " + "  ".join(f"{p:.2f}" for p in row))


if __name__ == "__main__":
    main()
