"""What a game is to the rest of the package: the `Environment` protocol and a plug-in record.

Self-play, replay, checkpoints and the searches see a game only through `Environment`:
`reset`, `step`, `legal_actions`, `to_play`, and its observation shape and dtype. It
does not depend on gymnasium: a game can wrap gymnasium, ALE, OpenSpiel, or be plain
Python (see tests/toy_game.py). Environments are pickled whole into checkpoints (games
in progress resume exactly), so an implementation keeps its state picklable.

A game family is a `GamePlugin` in one module: how to make an environment from the
name in `game.id`, and the dataclass of its settings (`game.kwargs`), which the config
loader validates like every other section.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np


class EnvironmentSpecError(ValueError):
    """A game that cannot be made, or that does not fit the config.

    Attributes:
      key: the config key the problem is reported under.
    """

    def __init__(self, message: str, key: str = "game.id"):
        super().__init__(message)
        self.key = key


def require_extra(module: str, extra: str, what: str) -> None:
    """Raises a one-line EnvironmentSpecError when `module` (a package of the optional extra
    `extra` in pyproject.toml) is not installed; `what` names what needs it."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise EnvironmentSpecError(
            f"{what} needs the Python package '{module}', which is not installed: "
            f"pip install -e '.[{extra}]' (or make install)"
        )


@runtime_checkable
class Environment(Protocol):
    """One game's rules or adapter.

    Attributes:
      observation_shape: shape of one observation, e.g. (4,) or (96, 96, 3).
      observation_dtype: np.float32, or np.uint8 for frames (the network scales them).
      action_space_size: A; actions are 0..A-1.
      num_players: 1, or 2 for games whose players alternate.
    """

    observation_shape: tuple[int, ...]
    observation_dtype: type
    action_space_size: int
    num_players: int

    def reset(self) -> np.ndarray:
        """Starts a new episode; returns its first observation."""

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool]:
        """Applies `action`; returns (observation, reward, terminated, truncated): terminated
        when the episode really ended, truncated when a time limit cut it."""

    def legal_actions(self) -> list[int]:
        """Actions allowed now."""

    def to_play(self) -> int:
        """The player to move now (0 in single-player games)."""

    def close(self) -> None:
        """Frees what the environment holds."""


@dataclass(frozen=True)
class EnvironmentSpec:
    """What the networks and searches need to know of a game, read from one environment."""

    observation_shape: tuple[int, ...]
    observation_dtype: type
    action_space_size: int
    num_players: int
    # `muzero.symmetries.Symmetry`s of the game (the identity first), read from the optional
    # `symmetries` attribute of an environment; () when it has none.
    symmetries: tuple = ()
    # (planes, rows, cols) of the board a flat observation holds, where the game's plug-in
    # knows one (`GamePlugin.board_shape`, filled in by `check_environment`): what a
    # convolutional network reshapes it by. None: observations are used as they are.
    board_shape: tuple[int, int, int] | None = None
    # Where an action acts on that board (`GamePlugin.board_actions`): "cells" or "columns";
    # what `network.action_planes: board` draws. None: not known.
    board_actions: str | None = None

    @staticmethod
    def of(environment: Environment) -> EnvironmentSpec:
        return EnvironmentSpec(
            tuple(environment.observation_shape),
            environment.observation_dtype,
            int(environment.action_space_size),
            int(environment.num_players),
            tuple(getattr(environment, "symmetries", ())),
        )


@dataclass(frozen=True)
class GamePlugin:
    """A family of games.

    Attributes:
      name: the `game.id` prefix that selects it ("atari" in "atari:ALE/Pong-v5").
      make: (name, seed, settings) -> Environment; `name` is `game.id` without the prefix,
        `settings` the validated `game.kwargs` (an instance of `settings`, or the plain
        mapping when `settings` is None). Raises EnvironmentSpecError for a bad game.
      settings: the frozen dataclass `game.kwargs` is checked against (None: any mapping,
        passed on as it is).
      network_kinds: the `network.kind`s its observations fit (empty: any).
      board_shape: (name, settings) -> (planes, rows, cols) for games whose flat observation
        is a board, [planes, rows, cols] flattened then a few more elements (the player to
        move): what a convolutional network reshapes it by (`network.kind: resnet`). None:
        observations are used as they are.
      board_actions: (name, settings) -> "cells" (one action per cell of that board, row by
        row), "columns" (one per column) or None: where an action acts, for
        `network.action_planes: board`. None: not known for any of its games.
    """

    name: str
    make: Callable[[str, int, Any], Environment]
    settings: type | None = None
    network_kinds: tuple[str, ...] = ()
    board_shape: Callable[[str, Any], tuple[int, int, int]] | None = None
    board_actions: Callable[[str, Any], str | None] | None = None
