"""Expected win / draw / loss against an opponent, summed over the game tree instead of sampled.

Why: a match of 100 games is a sample. An agent that loses one game in 100 on average
shows no loss in 37% of such matches (0.99 ** 100), and one that loses none can only be
told from it by many more games. Where the game is small (tic-tac-toe), the exact figure
is cheap: MuZero's greedy move is a function of the position (no noise, temperature 0),
and the arena's opponents are distributions over moves (`random`: uniform over the legal
moves; `perfect`: uniform over the optimal ones). So the probability of each outcome is a
sum over the positions the two can reach: at MuZero's positions its one move, at the
opponent's every move it may play, with its probability. Positions reached by different
move orders are merged, and MuZero's moves at all positions of one depth are one batched
search (`muzero.greedy.GreedyPlayer.moves`).

`scripts/exact_match.py` prints the figures for a run.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from muzero.arena import OpponentError, PerfectPlayer, board_game
from muzero.config import GameConfig
from muzero.game import Game
from muzero.greedy import GreedyPlayer
from muzero.networks.base import Network

# The positions a walk may hold before the game counts as too large (connect four's tree
# against a random player is).
MAX_POSITIONS = 200_000

Chooser = Callable[[list], list[int]]  # pyspiel states -> the deterministic player's move in each


def expected_outcome(
    game, choose: Chooser, opponent: str, player: int, start=None, max_moves: int | None = None
) -> tuple[float, float, float]:
    """(win, draw, loss) probabilities of `choose` playing `player` against `opponent`.

    Args:
      game: the pyspiel game.
      choose: the deterministic player; called once per depth with the list of its
        positions at that depth (distinct), it returns its move in each.
      opponent: "random" (uniform over the legal moves) or "perfect" (uniform over the
        optimal moves, as `muzero.arena.PerfectPlayer`).
      player: the side `choose` plays: 0 moves first.
      start: the position to start from (default: the game's initial state).
      max_moves: a game still going after this many moves counts as a draw (the arena's
        `max_moves` rule); None: no cap.

    Raises:
      OpponentError: an unknown opponent, or a game too large to walk.
    """
    if opponent == "random":
        moves = _legal_actions
    elif opponent == "perfect":
        moves = PerfectPlayer(game, np.random.default_rng(0)).optimal_actions
    else:
        raise OpponentError(f"unknown opponent {opponent!r} for an exact match: expected random or perfect")
    outcome = [0.0, 0.0, 0.0]
    start = start or game.new_initial_state()
    frontier = {_key(start): (start, 1.0)}
    walked = 0
    while frontier:
        walked += len(frontier)
        if walked > MAX_POSITIONS:
            raise OpponentError(
                f"an exact match walks more than {MAX_POSITIONS:,} positions here: the game is too large"
            )
        following: dict[str, tuple[object, float]] = {}
        mine = []
        for state, probability in frontier.values():
            if state.is_terminal() or (max_moves is not None and len(state.history()) >= max_moves):
                result = state.player_return(player) if state.is_terminal() else 0.0
                outcome[0 if result > 0 else 1 if result == 0 else 2] += probability
            elif state.current_player() == player:
                mine.append((state, probability))
            else:
                options = moves(state)
                for action in options:
                    _reach(following, state.child(action), probability / len(options))
        if mine:
            for (state, probability), action in zip(mine, choose([state for state, _ in mine])):
                _reach(following, state.child(int(action)), probability)
        frontier = following
    return outcome[0], outcome[1], outcome[2]


def _key(state) -> str:
    return f"{state.current_player()}|{state}"


def _legal_actions(state) -> list[int]:
    return state.legal_actions()


def _reach(positions: dict, state, probability: float) -> None:
    """Adds `probability` to `state`'s in `positions` (a position reached by several move orders)."""
    key = _key(state)
    positions[key] = (state, positions.get(key, (state, 0.0))[1] + probability)


def muzero_chooser(game_config: GameConfig, player: GreedyPlayer, network: Network, batch: int = 64) -> Chooser:
    """MuZero's greedy moves as a `Chooser`: `player`'s moves (the arena's search), `batch`
    positions at a time (the last batch padded, so that a compiled search is built once).

    Args:
      game_config: the `game` section (an OpenSpiel board game).
      player: made for `batch` games at once (`muzero.greedy.make_greedy_player`).
    """

    def replayed(state) -> Game:
        game = Game(
            game_config.action_space_size, game_config.discount, board_game(game_config), game_config.stacked_frames
        )
        for action in state.history():
            game.apply(int(action))
        return game

    def choose(states: list) -> list[int]:
        games = [replayed(state) for state in states]
        actions: list[int] = []
        for first in range(0, len(games), batch):
            chunk = games[first : first + batch]
            padded = chunk + [chunk[-1]] * (batch - len(chunk)) if player.side_by_side else chunk
            actions += player.moves(network, padded)[: len(chunk)]
        return actions

    return choose
