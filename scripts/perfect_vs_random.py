"""The yardstick under "wins against random": the perfect player's own score, computed exactly.

    python scripts/perfect_vs_random.py [--game tic_tac_toe]

The arena's perfect player (`muzero.arena`, exact negamax, uniform among its optimal moves)
never loses, but it does not try to win more than the game's value: where every move
draws, it picks any of them, also those that leave a random opponent no chance to go
wrong. Its expected win / draw / loss against OpenSpiel's uniform random player, as first
and as second player, follow from the game tree: at its own moves the average over its
optimal moves, at the opponent's the average over the legal moves. Also printed: the
best and the worst any fixed choice among the optimal moves can score, the range within
which a learned agent that plays perfectly lands, depending on which optimal moves it prefers.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def expected_outcome(game, perfect, player: int, choice: str = "uniform") -> tuple[float, float, float]:
    """(win, draw, loss) probabilities of `perfect` playing `player` against uniform random.

    Args:
      choice: how the perfect player picks among its optimal moves: "uniform" (the
        arena's), "best" or "worst" (the one with the most or the fewest wins against
        random: the range any fixed choice among optimal moves can score).
    """
    pick = {"uniform": None, "best": max, "worst": min}[choice]

    @functools.cache
    def outcome(history: tuple[int, ...]) -> tuple[float, float, float]:
        state = game.new_initial_state()
        for action in history:
            state.apply_action(action)
        if state.is_terminal():
            result = state.player_return(player)
            return float(result > 0), float(result == 0), float(result < 0)
        moves = perfect.optimal_actions(state) if state.current_player() == player else state.legal_actions()
        children = [outcome((*history, int(action))) for action in moves]
        if pick is not None and state.current_player() == player:
            return pick(children, key=lambda child: (child[0], -child[2]))
        return tuple(sum(child[i] for child in children) / len(children) for i in range(3))

    return outcome(())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="tic_tac_toe", help="an OpenSpiel game small enough to solve")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from muzero.arena import make_opponent
    from muzero.envs.openspiel import load_game

    game = load_game(args.game)
    perfect = make_opponent("perfect", game, seed=0)
    print(f"{args.game}: the perfect player against uniform random, expected win / draw / loss")
    for choice in ("uniform", "best", "worst"):
        sides = [expected_outcome(game, perfect, player, choice) for player in (0, 1)]
        print(f"choosing among its optimal moves: {choice}")
        for name, (win, draw, loss) in zip(("first", "second"), sides):
            print(f"  as {name:6s}  {win:.3f} / {draw:.3f} / {loss:.3f}")
        both = [sum(side[i] for side in sides) / 2 for i in range(3)]
        print(f"  half each  {both[0]:.3f} / {both[1]:.3f} / {both[2]:.3f}")


if __name__ == "__main__":
    main()
