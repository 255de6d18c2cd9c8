"""YAML <-> `MuZeroConfig`, with validation that names the file and the key path.

Every problem becomes one `ConfigError` whose message is a single line such as

    configs/cartpole.yaml: train.batch_sise: unknown key (did you mean 'batch_size'?)

The CLI prints it and exits with status 2. No TensorFlow is imported here, and no game:
the config a run uses is this file's `read_config` resolved against the game plug-ins by
`muzero.config_loader.load_config`.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from muzero.config import MuZeroConfig
from muzero.config_checks import check_consistency

# `--config defaults`: the built-in defaults, asked for by name (an empty file is refused).
BUILTIN_DEFAULTS = "defaults"
# The folder holding the `muzero` package: the source tree with `configs/` when the
# package is installed from it (`pip install -e .`, as `make install` does).
PROJECT_ROOT = Path(__file__).resolve().parents[1]


class ConfigError(ValueError):
    """A configuration problem; `str(error)` is one line naming where and what."""

    def __init__(self, where: str, key_path: str, message: str):
        self.where, self.key_path, self.message = where, key_path, message
        super().__init__(f"{where}: {key_path}: {message}" if key_path else f"{where}: {message}")


class ReadConfig(NamedTuple):
    """A config as the YAML files and `--set` overrides give it, before the game resolves it.

    Attributes:
      config: the typed config; `game.kwargs` still a plain mapping.
      where_of: key path -> the file (or "--set KEY=VALUE") that set it, for error messages.
      infer_actions: `game.action_space_size` was left out (or null): the game gives it.
    """

    config: MuZeroConfig
    where_of: Callable[[str], str]
    infer_actions: bool


def read_config(paths: str | Path | None | Sequence[str | Path | None], overrides: Sequence[str] = ()) -> ReadConfig:
    """Reads YAML files (or the defaults), merges them in order and applies `--set` overrides.

    Several files merge like layers: a later file's keys override an earlier one's, and
    mappings (sections, `game.kwargs`) merge key by key, so a small file can change a few
    keys of a shipped config (`--config configs/cartpole.yaml --config mine.yaml`); a
    null replaces a whole mapping. `--set` overrides come last.

    A relative path that does not exist under the current folder is looked up under the
    project folder that holds the `muzero` package (`find_config`), so the shipped
    configs (`configs/...`) are found from any folder.

    Args:
      paths: a YAML file or a list of them; every key must be a field of `MuZeroConfig`'s
        sections. None, or the word `defaults` (`--config defaults`; ./defaults names a
        file of that name): the built-in defaults (an empty layer).
      overrides: strings "dotted.key=value"; the value is parsed as YAML.

    Raises:
      ConfigError: on a missing, empty, non-UTF-8 or malformed file, an unknown key, a
        wrong type or an out-of-range value; the message names the file (or the --set)
        that set the key.
    """
    if paths is None or isinstance(paths, (str, Path)):
        paths = [paths]
    paths = list(paths) or [None]
    raw: dict = {}
    origins: dict[str, str] = {}  # key path -> the file (or --set) that set it last
    names = []
    for path in paths:
        layer, where = _read_layer(path)
        _upgrade_legacy_keys(layer)
        _merge(raw, layer, "", where, origins)
        names.append(where)
    fallback = " + ".join(names)

    for override in overrides:
        key_path, value = _parse_override(override)
        created = _set_path(raw, key_path, value, override)
        origins[key_path] = f"--set {override}"
        for known in list(origins):  # keys below it are now the --set's
            if known.startswith(key_path + "."):
                origins[known] = f"--set {override}"
        if created:  # a section only this --set names: its errors ("unknown key") are the --set's
            origins[created] = f"--set {override}"

    def where_of(key_path: str) -> str:
        # The longest prefix of `key_path` that a file or a --set set.
        parts = key_path.replace("[", ".[").split(".")
        for depth in range(len(parts), 0, -1):
            origin = origins.get(".".join(parts[:depth]).replace(".[", "["))
            if origin is not None:
                return origin
        return fallback

    game = raw.get("game")
    infer_actions = not isinstance(game, dict) or game.get("action_space_size") is None
    if isinstance(game, dict) and "action_space_size" in game and game["action_space_size"] is None:
        del game["action_space_size"]
    config = _convert(raw, MuZeroConfig, "", where_of)
    check_consistency(config, lambda key_path, message: ConfigError(where_of(key_path), key_path, message))
    return ReadConfig(config, where_of, infer_actions)


def convert_settings(kwargs: Mapping[str, Any], settings: type, where_of: Callable[[str], str]) -> Any:
    """`game.kwargs` converted to a game plug-in's settings dataclass, checked as any section is.

    Raises:
      ConfigError: an unknown key, a wrong type or an out-of-range value, at `game.kwargs.KEY`.
    """
    return _convert(kwargs, settings, "game.kwargs", where_of)


def find_config(path: str | Path) -> Path:
    """Where the config file `path` is: itself when it exists (or is absolute), otherwise,
    for a relative path, the same path under the project folder holding the `muzero`
    package (`configs/cartpole.yaml` from any folder, with the package installed from
    its source tree as the README does); `path` itself when neither exists."""
    path = Path(path)
    if path.is_absolute() or path.exists():
        return path
    shipped = PROJECT_ROOT / path
    return shipped if shipped.is_file() else path


def _read_layer(path: str | Path | None) -> tuple[dict, str]:
    """One config file as a raw mapping, and the name errors blame ("<defaults>" for none)."""
    if path is None or str(path) == BUILTIN_DEFAULTS:
        return {}, "<defaults>"
    given = Path(path)
    path = find_config(given)
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        hint = f" (nor under {PROJECT_ROOT})" if not given.is_absolute() else ""
        raise ConfigError(where, "", f"file not found{hint}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(
            where,
            "",
            f"not UTF-8 text (byte {error.object[error.start]:#04x} at offset {error.start}); expected a YAML file",
        ) from None
    except OSError as error:
        raise ConfigError(where, "", f"cannot read file ({error.strerror})") from None
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        place = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(error, "problem", None) or "invalid YAML"
        raise ConfigError(where, "", f"malformed YAML: {place}{problem}") from None
    if loaded is None:  # an empty file is more likely a mistake than a wish for the defaults
        raise ConfigError(
            where,
            "",
            f"empty config (no sections); to train on the built-in defaults, say so: --config {BUILTIN_DEFAULTS}",
        )
    if not isinstance(loaded, dict):
        raise ConfigError(where, "", f"expected a mapping of sections at top level, got {_kind(loaded)}")
    return loaded, where


def _merge(base: dict, layer: Mapping, prefix: str, where: str, origins: dict[str, str]) -> None:
    """Merges `layer` into `base` in place: mappings key by key, anything else replaced.
    Records in `origins` that `where` set every key path it touched."""
    for key, value in layer.items():
        path = _join(prefix, str(key))
        origins[path] = where
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value, path, where, origins)
        else:
            base[key] = _copy(value)
            for known in list(origins):  # what an earlier file set below this key is gone
                if known.startswith(path + "."):
                    del origins[known]
            _record(value, path, where, origins)


def _record(value: Any, path: str, where: str, origins: dict[str, str]) -> None:
    """Records that `where` set the keys inside the mapping `value`, found at `path`."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            origins[_join(path, str(key))] = where
            _record(item, _join(path, str(key)), where, origins)


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value


def _upgrade_legacy_keys(raw: dict) -> None:
    """Configs written before game plug-ins (run folders' config.yaml included) held the
    Atari wrapping in `game.atari`; it is now the Atari plug-in's `game.kwargs`."""
    game = raw.get("game")
    if isinstance(game, dict) and "atari" in game and "kwargs" not in game:
        atari = game.pop("atari")
        if atari is not None:
            game["kwargs"] = atari


def config_to_dict(config: Any) -> Any:
    """A plain, YAML-friendly copy of a config (tuples as lists)."""
    if dataclasses.is_dataclass(config):
        return {f.name: config_to_dict(getattr(config, f.name)) for f in dataclasses.fields(config)}
    if isinstance(config, (tuple, list)):
        return [config_to_dict(item) for item in config]
    return config


def config_to_yaml(config: MuZeroConfig) -> str:
    return yaml.safe_dump(config_to_dict(config), sort_keys=False, default_flow_style=None)


def _parse_override(override: str) -> tuple[str, Any]:
    key_path, sep, text = override.partition("=")
    if not sep or not key_path.strip():
        raise ConfigError(f"--set {override}", "", "expected KEY=VALUE with a dotted key, e.g. train.batch_size=64")
    try:
        value = yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError:
        raise ConfigError(f"--set {override}", key_path, "the value is not valid YAML") from None
    return key_path.strip(), value


def _set_path(raw: dict, key_path: str, value: Any, override: str) -> str | None:
    """Sets `raw[key_path]`; returns the shallowest section it had to create (None: none)."""
    node = raw
    parts = key_path.split(".")
    created = None
    for depth, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
            created = created or ".".join(parts[: depth + 1])
        if not isinstance(child, dict):
            prefix = ".".join(parts[: depth + 1])
            raise ConfigError(f"--set {override}", prefix, f"is {_kind(child)}, cannot set a key inside it")
        node = child
    node[parts[-1]] = value
    return created


def _kind(value: Any) -> str:
    names = {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
        type(None): "null",
    }
    return names.get(type(value), type(value).__name__)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _convert(value: Any, tp: Any, key_path: str, where_of: Callable[[str], str]) -> Any:
    """Converts raw YAML `value` to type `tp`, raising ConfigError at `key_path`."""

    def fail(message: str) -> ConfigError:
        return ConfigError(where_of(key_path), key_path, message)

    origin = typing.get_origin(tp)
    if tp is Any:  # a mapping whose keys a plug-in checks (game.kwargs)
        if value is None:
            return {}
        if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
            raise fail(f"expected a mapping of keyword arguments, got {_kind(value)}")
        return dict(value)
    if origin in (typing.Union, types.UnionType):
        options = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        if value is None:
            return None
        return _convert(value, options[0], key_path, where_of)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise fail(
                f"expected a mapping with keys {', '.join(f.name for f in dataclasses.fields(tp))}, got {_kind(value)}"
            )
        hints = typing.get_type_hints(tp)
        fields = {f.name: f for f in dataclasses.fields(tp)}
        for key in value:
            if key not in fields:
                close = difflib.get_close_matches(str(key), list(fields), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else f" (expected one of: {', '.join(fields)})"
                raise ConfigError(where_of(_join(key_path, str(key))), _join(key_path, str(key)), f"unknown key{hint}")
        kwargs = {}
        for name, f in fields.items():
            if name in value:
                sub_path = _join(key_path, name)
                kwargs[name] = _convert(value[name], hints[name], sub_path, where_of)
                _check_range(kwargs[name], f.metadata, sub_path, where_of)
        return tp(**kwargs)
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise fail(f"expected a list, got {_kind(value)}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(item, args[0], f"{key_path}[{i}]", where_of) for i, item in enumerate(value))
        if len(value) != len(args):
            raise fail(f"expected a list of {len(args)} items, got {len(value)}")
        return tuple(
            _convert(item, arg, f"{key_path}[{i}]", where_of) for i, (item, arg) in enumerate(zip(value, args))
        )
    if tp is bool:
        if not isinstance(value, bool):
            raise fail(f"expected true or false, got {_kind(value)} {value!r}")
        return value
    if tp is int:
        number = _as_number(value)
        if number is None or not float(number).is_integer():
            raise fail(f"expected an integer, got {_kind(value)} {value!r}")
        return int(number)
    if tp is float:
        number = _as_number(value)
        if number is None or not math.isfinite(number):
            raise fail(f"expected a number, got {_kind(value)} {value!r}")
        return float(number)
    if tp is str:
        if not isinstance(value, str):
            raise fail(f"expected a string, got {_kind(value)} {value!r}")
        return value
    raise fail(f"unsupported type {tp!r}")  # pragma: no cover - a bug in config.py


def _as_number(value: Any) -> float | int | None:
    """Numbers, and strings such as "1e-4" that YAML 1.1 leaves as strings."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _check_range(value: Any, metadata: Mapping, key_path: str, where_of: Callable[[str], str]) -> None:
    def fail(message: str) -> ConfigError:
        return ConfigError(where_of(key_path), key_path, message)

    if value is None:
        return
    if "choices" in metadata and value not in metadata["choices"]:
        raise fail(f"expected one of {', '.join(map(repr, metadata['choices']))}, got {value!r}")
    if "min" in metadata and value < metadata["min"]:
        raise fail(f"expected a value >= {metadata['min']}, got {value!r}")
    if "gt" in metadata and not value > metadata["gt"]:
        raise fail(f"expected a value > {metadata['gt']}, got {value!r}")
    if "max" in metadata and value > metadata["max"]:
        raise fail(f"expected a value <= {metadata['max']}, got {value!r}")
