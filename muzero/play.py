"""`muzero play`: a person against a trained agent in a two-player board game, in the terminal.

The board is OpenSpiel's drawing of the state. A move is typed as the game's action
string (tic-tac-toe: `x(1,1)`) or as the action number; anything else is asked again,
with the legal moves listed. It reads lines from any text stream, so it runs under
piped stdin (the tests drive it that way).
"""

from __future__ import annotations

from typing import TextIO

from muzero.arena import board_game
from muzero.config import GameConfig
from muzero.envs.openspiel import OpenSpielEnvironment
from muzero.game import Game
from muzero.greedy import GreedyPlayer
from muzero.networks.base import Network


def parse_move(text: str, environment: OpenSpielEnvironment) -> int | None:
    """The legal action `text` names (an action string or number), or None."""
    state, text = environment.state, text.strip()
    player = state.current_player()
    legal = state.legal_actions()
    by_name = {state.action_to_string(player, action).lower(): int(action) for action in legal}
    if text.lower() in by_name:
        return by_name[text.lower()]
    if text.lstrip("-").isdigit() and int(text) in legal:
        return int(text)
    return None


def legal_moves_text(environment: OpenSpielEnvironment) -> str:
    state = environment.state
    return ", ".join(f"{state.action_to_string(state.current_player(), a)} ({a})" for a in state.legal_actions())


def play(
    game_config: GameConfig,
    player: GreedyPlayer,
    network: Network,
    human_first: bool,
    stdin: TextIO,
    stdout: TextIO,
) -> int:
    """One game of a person (from `stdin`) against the agent; returns the person's result,
    +1 win, 0 draw, -1 loss. Raises EOFError when `stdin` ends before the game does.

    Args:
      game_config: the `game` section (an OpenSpiel board game).
      player: the agent's greedy moves, for one game (`muzero.greedy.make_greedy_player`).
    """
    environment = board_game(game_config)
    game = Game(game_config.action_space_size, game_config.discount, environment, game_config.stacked_frames)
    human = 0 if human_first else 1
    print(
        f"You play {'first' if human_first else 'second'} (player {human}). Type a move as shown, or its number.",
        file=stdout,
    )
    while not game.terminal():
        print(f"\n{environment.render()}", file=stdout)
        if game.to_play() == human:
            action = None
            while action is None:
                print(f"your move ({legal_moves_text(environment)}): ", end="", file=stdout, flush=True)
                line = stdin.readline()
                if not line:
                    raise EOFError("input ended before the game did")
                action = parse_move(line, environment)
                if action is None:
                    print(f"{line.strip()!r} is not a legal move here.", file=stdout)
        else:
            (action,) = player.moves(network, [game])
            name = environment.state.action_to_string(environment.state.current_player(), action)
            print(f"MuZero plays {name} ({action})", file=stdout)
        game.apply(action)
    print(f"\n{environment.render()}", file=stdout)
    outcome = int(environment.state.player_return(human))
    print({1: "You win.", 0: "Draw.", -1: "MuZero wins."}[outcome], file=stdout)
    return outcome
