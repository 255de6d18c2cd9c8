"""Game plug-ins: the registry that `game.id` selects from, and the one place games are made.

`game.id` names a plug-in and a game in it:

* `<plugin>:<name>` for a registered plug-in: `gym:CartPole-v1`, `atari:ALE/Pong-v5`,
  `openspiel:tic_tac_toe`;
* an id starting with `ALE/` is an Atari game (`ALE/Pong-v5`), one starting with
  `MinAtar/` a MinAtar game (`MinAtar/Breakout-v1`, the same as `minatar:breakout`);
* `<module>:<function>` for a game outside the package: `function(seed, **game.kwargs)`
  returns an `Environment` (the module must be importable);
* anything else is a gymnasium id (`CartPole-v1`).

`game.kwargs` are the plug-in's settings, checked against its settings dataclass when
it declares one (`muzero.config_loader` does that at load time, before any game is made,
with `check_game_plugin` and `infer_action_space_size`).
Plug-in modules are imported only when their game is used, so loading a config never
imports ALE (or Ray, or TensorFlow).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from muzero.envs.base import Environment, EnvironmentSpec, EnvironmentSpecError, GamePlugin

if TYPE_CHECKING:
    from muzero.config import GameConfig, MuZeroConfig, NetworkConfig, SearchConfig

__all__ = [
    "Environment",
    "EnvironmentSpec",
    "EnvironmentSpecError",
    "GamePlugin",
    "board_shape_of",
    "check_config_environment",
    "check_environment",
    "check_game_plugin",
    "infer_action_space_size",
    "make_environment",
    "make_environments",
    "resolve_game",
]

# Registered plug-ins: prefix -> module holding `PLUGIN`.
PLUGINS = {
    "gym": "muzero.envs.gym",
    "atari": "muzero.envs.atari",
    "openspiel": "muzero.envs.openspiel",
    "minatar": "muzero.envs.minatar",
}


def resolve_game(game_id: str) -> tuple[GamePlugin, str]:
    """The plug-in `game_id` selects and the game's name inside it.

    Raises:
      EnvironmentSpecError: an external `module:function` that cannot be imported.
    """
    prefix, sep, rest = game_id.partition(":")
    if sep and prefix in PLUGINS:
        return importlib.import_module(PLUGINS[prefix]).PLUGIN, rest
    if game_id.startswith("ALE/"):
        return importlib.import_module(PLUGINS["atari"]).PLUGIN, game_id
    if game_id.startswith("MinAtar/"):
        return importlib.import_module(PLUGINS["minatar"]).PLUGIN, game_id
    if sep and rest and prefix.replace(".", "").replace("_", "").isalnum():
        return _external_plugin(prefix, rest), game_id
    return importlib.import_module(PLUGINS["gym"]).PLUGIN, game_id


def _external_plugin(module_name: str, function_name: str) -> GamePlugin:
    """A game factory outside the package, named as `module:function`."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise EnvironmentSpecError(f"cannot import the game module {module_name!r} ({error})") from None
    factory = getattr(module, function_name, None)
    if not callable(factory):
        raise EnvironmentSpecError(f"module {module_name!r} has no function {function_name!r}")

    def make(name: str, seed: int, kwargs: Mapping[str, Any]) -> Environment:
        try:
            return factory(seed, **kwargs)
        except (TypeError, ValueError) as error:  # an unexpected keyword argument, a bad value
            raise EnvironmentSpecError(f"{name}: {error}", key="game.kwargs") from None

    return GamePlugin(name=f"{module_name}:{function_name}", make=make)


def make_environment(game: GameConfig, seed: int) -> Environment:
    """The environment `game` (the `game` config section) names, seeded with `seed`."""
    plugin, name = resolve_game(game.id)
    return plugin.make(name, seed, game.kwargs)


def make_environments(game: GameConfig, count: int, seed: int) -> list[Environment]:
    """`count` environments with distinct, reproducible seeds."""
    return [make_environment(game, seed * 10_007 + i) for i in range(count)]


def check_game_plugin(game: GameConfig, network_kind: str) -> type | None:
    """Resolves `game.id` to its plug-in and checks that the plug-in runs `network.kind`.

    Args:
      game: the `game` section.
      network_kind: `network.kind`.

    Returns:
      The plug-in's settings dataclass, which `game.kwargs` must convert to; None when the
      plug-in takes `game.kwargs` as they are.

    Raises:
      EnvironmentSpecError: keyed `game.id` (an external module that cannot be imported) or
        `network.kind` (a kind the plug-in's games cannot run).
    """
    try:
        plugin, _ = resolve_game(game.id)
    except EnvironmentSpecError as error:
        raise EnvironmentSpecError(str(error), key="game.id") from None
    if plugin.network_kinds and network_kind not in plugin.network_kinds:
        raise EnvironmentSpecError(
            f"{plugin.name} games need network.kind: {' or '.join(plugin.network_kinds)}", key="network.kind"
        )
    return plugin.settings


def infer_action_space_size(game: GameConfig) -> int:
    """`game.action_space_size` read from one environment of the `game` section's game.

    Raises:
      EnvironmentSpecError: the game cannot be made (a bad `game.kwargs`, a missing extra),
        keyed by the config key to blame.
    """
    environment = make_environment(game, seed=0)
    try:
        return int(environment.action_space_size)
    finally:
        environment.close()


def board_shape_of(game: GameConfig) -> tuple[int, int, int] | None:
    """(planes, rows, cols) of the board in the game's flat observations, where its plug-in
    knows one (`GamePlugin.board_shape`); None otherwise."""
    plugin, name = resolve_game(game.id)
    return None if plugin.board_shape is None else plugin.board_shape(name, game.kwargs)


def _board_shape_or_none(game: GameConfig) -> tuple[int, int, int] | None:
    """The board of a flat observation, or None for a game without one (its plug-in says so
    by raising, which matters only when a resnet asks: `check_environment` reports it then)."""
    try:
        return board_shape_of(game)
    except EnvironmentSpecError:
        return None


def _board_actions(game: GameConfig) -> str | None:
    """Where the game's actions act on its board (`GamePlugin.board_actions`), or None."""
    plugin, name = resolve_game(game.id)
    return None if plugin.board_actions is None else plugin.board_actions(name, game.kwargs)


def _check_action_planes(game_id: str, spec: EnvironmentSpec, network_kind: str) -> None:
    """`network.action_planes: board` needs a resnet over a board whose plug-in knows where its
    actions act (one per cell, or one per column)."""
    if network_kind != "resnet" or spec.board_shape is None or spec.board_actions is None:
        raise EnvironmentSpecError(
            f"network.action_planes: board draws each action where it acts on a board: it needs network.kind "
            f"resnet and a board game whose actions are cells or columns (known: tic-tac-toe, connect four), "
            f"not {game_id} with network.kind {network_kind}",
            key="network.action_planes",
        )


def check_environment(
    game: GameConfig,
    augment_symmetries: bool = False,
    network: NetworkConfig | None = None,
    search: SearchConfig | None = None,
) -> EnvironmentSpec:
    """Makes one environment and checks it against the `game` section; returns what it is.

    Args:
      augment_symmetries: `replay.augment_symmetries`: the game must have symmetries.
      network: the `network` section: a resnet needs image observations or a board
        (`GamePlugin.board_shape`), and a board keeps its size (`downsample: false`).
      search: the `search` section: Gumbel's completed Q-values need the negamax rule
        with two players (each node's values from its mover's view); with `random_symmetry`, the
        game must have symmetries.

    Raises:
      EnvironmentSpecError: with a one-line message and the config key to blame.
    """
    env = make_environment(game, seed=0)
    try:
        spec = EnvironmentSpec.of(env)
        if spec.action_space_size != game.action_space_size:
            raise EnvironmentSpecError(
                f"{game.id} has {spec.action_space_size} actions, but "
                f"game.action_space_size is {game.action_space_size}",
                key="game.action_space_size",
            )
        if game.stacked_frames > 1 and len(spec.observation_shape) != 3:
            raise EnvironmentSpecError(
                f"stacking frames needs image observations [H, W, C]; {game.id} gives shape {spec.observation_shape}",
                key="game.stacked_frames",
            )
        if spec.num_players not in (1, 2):
            raise EnvironmentSpecError(
                f"{game.id}: {spec.num_players} players; only 1 or 2 (alternating) are supported"
            )
        gumbel = search is not None and search.algorithm == "gumbel"
        if gumbel and spec.num_players > 1 and search.two_player_rule != "negamax":
            raise EnvironmentSpecError(
                f"{game.id} has two players: Gumbel MuZero needs search.two_player_rule: negamax "
                "(the pseudocode's rule leaves the other player's values unnegated)",
                key="search.two_player_rule",
            )
        if network is not None and network.kind == "resnet" and len(spec.observation_shape) == 1:
            board = board_shape_of(game)  # raises for a board game whose tensor is not a board
            if board is None:
                raise EnvironmentSpecError(
                    f"{game.id} gives flat observations of shape {spec.observation_shape} and no board: "
                    "network.kind resnet needs images or a board",
                    key="network.kind",
                )
            _, rows, cols = board
            if network.downsample:
                raise EnvironmentSpecError(
                    f"{game.id}: a {rows}x{cols} board is too small for the 96->6 downsampling stack "
                    "(it would end at 1x1); set network.downsample: false",
                    key="network.downsample",
                )
        if len(spec.observation_shape) == 1:
            spec = dataclasses.replace(spec, board_shape=_board_shape_or_none(game), board_actions=_board_actions(game))
        if network is not None and network.action_planes == "board":
            _check_action_planes(game.id, spec, network.kind)
        asked = "replay.augment_symmetries" if augment_symmetries else None
        if search is not None and search.random_symmetry:
            asked = "search.random_symmetry"
        if asked and not spec.symmetries:
            raise EnvironmentSpecError(
                f"{game.id} has no known symmetries (known: tic-tac-toe, connect four, CartPole)", key=asked
            )
        return spec
    finally:
        env.close()


def check_config_environment(config: MuZeroConfig) -> EnvironmentSpec:
    """`check_environment` with every section of `config` it checks (game, symmetries, network,
    search), as `muzero train` checks a run: one place, so no loader forgets a section."""
    return check_environment(config.game, config.replay.augment_symmetries, config.network, config.search)
