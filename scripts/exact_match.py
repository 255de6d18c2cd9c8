"""A run's exact expected win / draw / loss against the perfect and the random player.

    python scripts/exact_match.py --run runs/bench_boardgames/tictactoe_seed0 [--simulations N]

`muzero evaluate --opponent` samples games; this sums over the game tree
(`muzero.exact_match`): every position MuZero's greedy moves and the opponent's possible
moves can reach, each with its probability. It prints, per side and for 100 games played
half from each side (the arena's matches), the expected wins, draws and losses, and the
probability that such a match shows no loss at all. For games small enough to walk
(tic-tac-toe).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def match_summary(first: tuple[float, float, float], second: tuple[float, float, float], games: int = 100) -> dict:
    """Expected counts over `games` games, half from each side, and P(no loss in them)."""
    half = games // 2
    expected = {name: half * (first[i] + second[i]) for i, name in enumerate(("win", "draw", "loss"))}
    expected["p_no_loss"] = (1.0 - first[2]) ** half * (1.0 - second[2]) ** half
    return expected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a run folder of a small board game (tic-tac-toe)")
    parser.add_argument("--opponents", nargs="+", default=["perfect", "random"], choices=["perfect", "random"])
    parser.add_argument("--simulations", type=int, default=None, help="search budget (default: the run's)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from muzero.arena import board_game
    from muzero.evaluation import load_run
    from muzero.exact_match import expected_outcome, muzero_chooser
    from muzero.greedy import make_greedy_player

    config, spec, network, step = load_run(Path(args.run), args.simulations)
    game = board_game(config.game).game
    choose = muzero_chooser(config.game, make_greedy_player(config, spec, 64), network, batch=64)
    print(f"{args.run}: checkpoint at training step {step}, {config.search.num_simulations} simulations per move")
    print(f"{'opponent':<10}{'side':<8}{'win':>8}{'draw':>8}{'loss':>8}")
    for opponent in args.opponents:
        sides = [expected_outcome(game, choose, opponent, player, max_moves=config.max_moves) for player in (0, 1)]
        for name, (win, draw, loss) in zip(("first", "second"), sides):
            print(f"{opponent:<10}{name:<8}{win:>8.4f}{draw:>8.4f}{loss:>8.4f}")
        summary = match_summary(*sides)
        print(
            f"{opponent:<10}100 games, 50 per side: expected {summary['win']:.2f} wins, {summary['draw']:.2f} draws, "
            f"{summary['loss']:.2f} losses; P(no loss) {summary['p_no_loss']:.3f}"
        )


if __name__ == "__main__":
    main()
