"""The config a run uses: the YAML files read and checked (`muzero.config_io`), then the
`game` section resolved against its game plug-in (`muzero.envs`).

Config loading (`config_io`) is the layer below everything and knows no game; this module
sits above both and joins them, so that a plug-in problem is still one `ConfigError` that
names the file (or the `--set`) that set the key:

    configs/tiny.yaml: game.kwargs: CartPole-v1: ... unexpected keyword argument 'no_such_argument'

No TensorFlow is imported here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from muzero.config import GameConfig, MuZeroConfig
from muzero.config_io import ConfigError, config_to_dict, convert_settings, read_config
from muzero.envs import EnvironmentSpecError, check_game_plugin, infer_action_space_size


def load_config(paths: str | Path | None | Sequence[str | Path | None], overrides: Sequence[str] = ()) -> MuZeroConfig:
    """Reads a run's config (`muzero.config_io.read_config`) and resolves its game.

    `game.kwargs` become the plug-in's settings dataclass where it declares one, and
    `game.action_space_size` left out (or null) is read from the environment: one
    environment is made from `game.id` and `game.kwargs` (a bad keyword argument is then
    reported here, at `game.kwargs`). A given value is checked against the environment
    later, by `muzero.envs.check_environment`.

    Args:
      paths: a YAML file or a list of them, merged in order; None or `defaults`: the
        built-in defaults.
      overrides: strings "dotted.key=value"; the value is parsed as YAML.

    Raises:
      ConfigError: one line naming the file (or the --set) that set the key at fault.
    """
    read = read_config(paths, overrides)
    game = resolve_game_section(read.config.game, read.config.network.kind, read.where_of, read.infer_actions)
    return read.config.replace(game=game)


def resolve_game_section(
    game: GameConfig, network_kind: str, where_of: Callable[[str], str], infer_actions: bool
) -> GameConfig:
    """The `game` section resolved against its plug-in: settings converted, actions counted.

    Args:
      game: the `game` section as read, `game.kwargs` a mapping.
      network_kind: `network.kind`, which the plug-in may restrict (Atari: resnet).
      where_of: key path -> the file or --set that set it (`ReadConfig.where_of`).
      infer_actions: read `game.action_space_size` from one environment of the game.

    Raises:
      ConfigError: an unknown game module, a network kind the plug-in cannot run, bad
        settings or a game that cannot be made.
    """

    def blame(error: EnvironmentSpecError) -> ConfigError:
        return ConfigError(where_of(error.key), error.key, str(error))

    try:
        settings = check_game_plugin(game, network_kind)
    except EnvironmentSpecError as error:
        raise blame(error) from None
    if settings is not None and not isinstance(game.kwargs, settings):
        game = dataclasses.replace(game, kwargs=convert_settings(game.kwargs, settings, where_of))
    if infer_actions:
        try:
            game = dataclasses.replace(game, action_space_size=infer_action_space_size(game))
        except EnvironmentSpecError as error:
            raise blame(error) from None
    return game


def config_changes(old: Any, new: Any) -> dict[str, tuple[Any, Any]]:
    """The keys whose values differ between two configs (or two sections), sorted by key:
    {"train.lr_init": (0.05, 0.1), ...}."""
    return _diff(config_to_dict(old), config_to_dict(new))


def _diff(old: dict, new: dict, prefix: str = "") -> dict:
    out = {}
    for key in old.keys() | new.keys():
        path = f"{prefix}{key}"
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out.update(_diff(a, b, path + "."))
        elif a != b:
            out[path] = (a, b)
    return dict(sorted(out.items()))
