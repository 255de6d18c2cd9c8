"""Two-player board games from OpenSpiel (`open_spiel` on PyPI): tic-tac-toe, connect four, ...

`game.id: openspiel:<name>` with the game's OpenSpiel name, parameters included
(`openspiel:connect_four(rows=5,columns=6)`, no spaces); `game.kwargs` are further
OpenSpiel parameters. Any two-player, turn-taking, perfect-information, deterministic,
zero-sum OpenSpiel game whose players alternate fits; others are refused with one line
(games with extra turns, such as checkers' multiple jumps, among them: `repeated_turn`).

What MuZero sees (conventions for two players, see `Game.make_target` and the search's
`two_player_rule`):
* observation: the game's observation tensor for the player to move, flattened, then
  one more element holding that player (0 or 1), so that a network can tell whose move
  it is even where the tensor is the same for both (tic-tac-toe's is). Where the planes
  of each player's stones are known (`_PLAYER_PLANES`: tic-tac-toe, connect four), the
  board is seen from the player to move, as AlphaZero's and MuZero's board inputs: the
  mover's stones in the first player's plane, the opponent's in the other, so that "my
  line" is one pattern for both players. Other games keep OpenSpiel's tensor as it is.
* reward: the mover's, from `state.rewards()` after the move: +1 for the winning move,
  -1 for a move that loses, 0 otherwise (draws included).
* to_play: `state.current_player()`; after the end, the player who would move next.
* legal actions: `state.legal_actions()`; an illegal action raises.

The environment pickles as the game's name and the moves played, so checkpoints
resume games in progress exactly.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping

import numpy as np

from muzero.envs.base import EnvironmentSpecError, GamePlugin
from muzero.symmetries import Symmetry, board_symmetries


def load_game(name: str, parameters: Mapping | None = None):
    """`pyspiel.load_game`, refusing games that are not two-player turn-taking board games.

    Raises:
      EnvironmentSpecError: an unknown game or parameter, or a game of another kind.
    """
    import pyspiel

    try:
        with _quiet_stderr():  # OpenSpiel prints each error to stderr before raising it
            game = pyspiel.load_game(name, dict(parameters or {})) if parameters else pyspiel.load_game(name)
    except pyspiel.SpielError as error:
        message = str(error).strip().splitlines()[0].replace(" Available games are:", "")
        raise EnvironmentSpecError(f"openspiel:{name}: {message}") from None
    kind = game.get_type()
    problems = []
    if game.num_players() != 2:
        problems.append(f"{game.num_players()} player" + ("s" if game.num_players() > 1 else ""))
    if kind.dynamics != pyspiel.GameType.Dynamics.SEQUENTIAL:
        problems.append("not turn-taking")
    if kind.information != pyspiel.GameType.Information.PERFECT_INFORMATION:
        problems.append("imperfect information")
    if kind.chance_mode != pyspiel.GameType.ChanceMode.DETERMINISTIC:
        problems.append("chance moves")
    if kind.utility != pyspiel.GameType.Utility.ZERO_SUM:
        problems.append("not zero-sum")
    if not problems:
        repeated = repeated_turn(game)
        if repeated:
            problems.append(repeated)
    if problems:
        raise EnvironmentSpecError(
            f"openspiel:{name}: only two-player, turn-taking, perfect-information, "
            f"deterministic, zero-sum games are supported ({', '.join(problems)})"
        )
    return game


# Random games played to see whether the players alternate, and their length cap.
_ALTERNATION_PROBES, _ALTERNATION_PROBE_MOVES = 16, 300
_alternation: dict[str, str | None] = {}


# Why: the searches and the targets take the player to move from the move number (players
# alternate, as in the pseudocode's board games), and OpenSpiel's game type does not say
# whether a game gives extra turns (checkers' multiple jumps, dots and boxes, mancala) or
# splits a move into several actions (amazons). Random games find such turns at once in
# the games we know of; `OpenSpielEnvironment.step` refuses any that a probe missed.
def repeated_turn(game) -> str | None:
    """Where a player moved twice in a row in one of a few seeded random games of `game`
    ("player 0 moves again after move 1 of a random game"), or None if they alternated."""
    key = str(game)
    if key not in _alternation:
        _alternation[key] = None
        rng = np.random.default_rng(0)
        for _ in range(_ALTERNATION_PROBES):
            state = game.new_initial_state()
            for move in range(1, _ALTERNATION_PROBE_MOVES + 1):
                if state.is_terminal():
                    break
                mover = state.current_player()
                state.apply_action(int(rng.choice(state.legal_actions())))
                if not state.is_terminal() and state.current_player() == mover:
                    _alternation[key] = f"player {mover} moves again after move {move} of a random game"
                    break
            if _alternation[key]:
                break
    return _alternation[key]


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """File descriptor 2 to /dev/null for a while (C++ writes there directly)."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class OpenSpielEnvironment:
    """An OpenSpiel two-player game behind the `Environment` protocol.

    Args:
      name: the OpenSpiel name, parameters included.
      seed: unused (the games are deterministic); kept for the plug-in signature.
      parameters: more OpenSpiel parameters (`game.kwargs`).

    Attributes:
      game, state: the pyspiel game and the current state (bots and `muzero play` read them).
      symmetries: the board's symmetries (`game_symmetries`), for `replay.augment_symmetries`.
    """

    observation_dtype = np.float32
    num_players = 2

    def __init__(self, name: str, seed: int = 0, parameters: Mapping | None = None):
        self.name, self.seed, self.parameters = name, seed, dict(parameters or {})
        self.game = load_game(name, self.parameters)
        self.action_space_size = self.game.num_distinct_actions()
        self.observation_shape = (int(np.prod(self.game.observation_tensor_shape())) + 1,)
        self.state = self.game.new_initial_state()
        self.symmetries = game_symmetries(self.game)
        self.player_planes = player_planes(self.game)

    def reset(self) -> np.ndarray:
        self.state = self.game.new_initial_state()
        return self.observation()

    def observation(self) -> np.ndarray:
        """The observation tensor for the player to move, flattened, then that player; the
        two players' stone planes swapped when player 1 is to move (`player_planes`)."""
        player = self.to_play()
        tensor = np.asarray(self.state.observation_tensor(player), np.float32)
        if self.player_planes is not None and player == 1:
            planes = tensor.reshape(self.game.observation_tensor_shape()[0], -1)
            first, second = self.player_planes
            planes[[first, second]] = planes[[second, first]]
        return np.append(tensor, np.float32(player))

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool]:
        action = int(action)
        if action not in self.state.legal_actions():
            raise ValueError(f"{self.name}: action {action} is not legal here (legal: {self.state.legal_actions()})")
        mover = self.state.current_player()
        self.state.apply_action(action)
        if not self.state.is_terminal() and self.state.current_player() == mover:
            raise ValueError(
                f"{self.name}: player {mover} moves again after move {len(self.state.history())}; "
                "only games whose players alternate are supported"
            )
        reward = float(self.state.rewards()[mover])
        return self.observation(), reward, bool(self.state.is_terminal()), False

    def legal_actions(self) -> list[int]:
        return [int(action) for action in self.state.legal_actions()]

    def to_play(self) -> int:
        if self.state.is_terminal():
            return len(self.state.history()) % 2  # who would move next: players alternate from 0
        return int(self.state.current_player())

    def close(self) -> None:
        pass

    def render(self) -> str:
        """The board as OpenSpiel draws it."""
        return str(self.state)

    def frame(self) -> np.ndarray:
        """The board as a picture (`muzero evaluate --opponent ... --video`): uint8 [rows *
        CELL_PIXELS, cols * CELL_PIXELS, 3], the top row first, each cell a disc on a blue
        board: player 0's stones red, player 1's yellow, an empty cell white.

        Raises:
          ValueError: the planes that hold the stones are not known for this game (`player_planes`).
        """
        if self.player_planes is None:
            raise ValueError(f"openspiel:{self.name}: which planes hold the stones is not known here, so no picture")
        planes, rows, cols = self.game.observation_tensor_shape()
        tensor = np.asarray(self.state.observation_tensor(0)).reshape(planes, rows, cols)  # the same for both players
        cells = np.broadcast_to(FRAME_COLOURS["empty"], (rows, cols, 3)).copy()
        for player, plane in enumerate(self.player_planes):
            cells[tensor[plane] > 0] = FRAME_COLOURS[f"player {player}"]
        if self.game.get_type().short_name in _BOTTOM_ROW_FIRST:
            cells = cells[::-1]
        image = np.repeat(np.repeat(cells, CELL_PIXELS, axis=0), CELL_PIXELS, axis=1)
        image[~np.tile(_DISC, (rows, cols))] = FRAME_COLOURS["board"]
        return image

    def __getstate__(self) -> dict:
        return {
            "name": self.name,
            "seed": self.seed,
            "parameters": self.parameters,
            "history": [int(action) for action in self.state.history()],
        }

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["name"], state["seed"], state["parameters"])
        for action in state["history"]:
            self.state.apply_action(action)


# Where an action acts on the board: tic-tac-toe's actions are its cells (row by row),
# connect four's its columns. Other games: not known here.
_BOARD_ACTIONS = {"tic_tac_toe": "cells", "connect_four": "columns"}

# Games whose rules are known to keep their symmetries: the square's 8 for tic-tac-toe
# (with rotations), the left-right mirror for connect four (an upside-down board would
# break gravity). Other games: none known here.
_SYMMETRIC_GAMES = {"tic_tac_toe": True, "connect_four": False}


# The observation planes holding player 0's and player 1's stones (tests/test_openspiel.py
# checks them against OpenSpiel's tensors). Other games: not known here.
_PLAYER_PLANES = {"tic_tac_toe": (2, 1), "connect_four": (0, 1)}


# Games whose observation tensor holds the bottom row first (connect four's stones fall to
# row 0): `OpenSpielEnvironment.frame` turns them the right way up. Others: the top row first.
_BOTTOM_ROW_FIRST = {"connect_four"}

# `OpenSpielEnvironment.frame`: pixels a cell is wide and high, its disc, and the colours (RGB).
CELL_PIXELS = 16
_SQUARED = (np.arange(CELL_PIXELS) + 0.5 - CELL_PIXELS / 2) ** 2  # from a pixel's centre to the cell's, one axis
_DISC = _SQUARED[:, None] + _SQUARED[None, :] <= (0.4 * CELL_PIXELS) ** 2  # [CELL_PIXELS, CELL_PIXELS] bool
FRAME_COLOURS = {
    "player 0": np.array([220, 40, 40], np.uint8),
    "player 1": np.array([240, 200, 30], np.uint8),
    "empty": np.array([240, 240, 240], np.uint8),
    "board": np.array([25, 60, 140], np.uint8),
}


def player_planes(game) -> tuple[int, int] | None:
    """(plane of player 0's stones, plane of player 1's) in the game's observation tensor,
    [planes, rows, cols]; None when not known."""
    return _PLAYER_PLANES.get(game.get_type().short_name)


def game_symmetries(game) -> tuple[Symmetry, ...]:
    """The symmetries of a pyspiel game (`muzero.symmetries`), the identity first; () when
    none is known. Observations are this module's: [planes, rows, cols] flattened, then the
    player to move."""
    name = game.get_type().short_name
    rotations = _SYMMETRIC_GAMES.get(name)
    if rotations is None:
        return ()
    planes, rows, cols = game.observation_tensor_shape()
    if rotations and rows != cols:
        return ()
    return board_symmetries(planes, rows, cols, extra=1, actions=_BOARD_ACTIONS[name], rotations=rotations)


def _make(name: str, seed: int, parameters: Mapping) -> OpenSpielEnvironment:
    return OpenSpielEnvironment(name, seed, parameters)


def board_shape(name: str, parameters: Mapping) -> tuple[int, int, int]:
    """(planes, rows, cols) of the game's observation tensor: the board that a convolutional
    network sees in this module's flat observations (the player to move after it).

    Raises:
      EnvironmentSpecError: the tensor is not [planes, rows, cols] (a game without a board).
    """
    shape = tuple(load_game(name, parameters).observation_tensor_shape())
    if len(shape) != 3:
        raise EnvironmentSpecError(
            f"openspiel:{name}: its observation tensor has shape {list(shape)}, not [planes, rows, cols]: "
            "no board for a convolutional network (use network.kind: mlp)",
            key="network.kind",
        )
    return shape


def board_actions(name: str, parameters: Mapping) -> str | None:
    """Where the game's actions act on its board: "cells" (one action per cell, row by row),
    "columns" (one per column), or None when not known."""
    return _BOARD_ACTIONS.get(load_game(name, parameters).get_type().short_name)


# Observations are flat vectors: the MLP sees them as they are, the resnet as the board
# planes they hold (`board_shape`), as the paper's board-game networks.
PLUGIN = GamePlugin(
    name="openspiel",
    make=_make,
    network_kinds=("mlp", "resnet"),
    board_shape=board_shape,
    board_actions=board_actions,
)
