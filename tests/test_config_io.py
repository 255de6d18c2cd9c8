"""muzero/config_io.py and muzero/config_loader.py: several config files merged in order,
configs found from any folder, `game.action_space_size` read from the environment, bad
`game.kwargs` as one ConfigError, the game plug-in's checks, and the changes between configs."""

from __future__ import annotations

import importlib.util

import pytest

from muzero.config_io import PROJECT_ROOT, ConfigError, find_config
from muzero.config_loader import load_config
from muzero.envs import EnvironmentSpecError, check_environment
from tests.helpers import ATARI_TINY, TINY


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_files_merge_in_order_with_set_last(tmp_path):
    base = _write(
        tmp_path,
        "base.yaml",
        "train:\n  batch_size: 8\n  td_steps: 3\nnetwork:\n  hidden_layers: [16, 16]\n  support_size: 5\n",
    )
    over = _write(tmp_path, "over.yaml", "train:\n  batch_size: 32\nnetwork:\n  hidden_layers: [4]\n")
    config = load_config([base, over], ["train.batch_size=64", "train.lr_init=0.2"])
    # batch_size: 8 (base) -> 32 (over) -> 64 (--set, last).
    assert config.train.batch_size == 64
    # td_steps only in base: kept, the section merged key by key, not replaced by over's.
    assert config.train.td_steps == 3
    # A list is a value, replaced whole: [16, 16] -> [4].
    assert config.network.hidden_layers == (4,)
    # support_size only in base; lr_init only in --set; momentum in neither: the default 0.9.
    assert config.network.support_size == 5
    assert config.train.lr_init == 0.2
    assert config.train.momentum == 0.9
    # The other order: base's 8 is the last file's word.
    assert load_config([over, base]).train.batch_size == 8


def test_game_kwargs_merge_key_by_key_and_null_replaces_the_mapping(tmp_path):
    a = _write(tmp_path, "a.yaml", "game:\n  kwargs: {max_episode_steps: 100}\n")
    b = _write(tmp_path, "b.yaml", "game:\n  kwargs: {sutton_barto_reward: true}\n")
    reset = _write(tmp_path, "reset.yaml", "game:\n  kwargs: null\n")
    assert load_config([a, b]).game.kwargs == {"max_episode_steps": 100, "sutton_barto_reward": True}
    assert load_config([a, reset]).game.kwargs == {}


def test_an_error_names_the_file_that_set_the_key(tmp_path):
    good = _write(tmp_path, "good.yaml", "train:\n  batch_size: 8\n")
    bad = _write(tmp_path, "bad.yaml", "train:\n  td_steps: 0\n")
    with pytest.raises(ConfigError) as error:
        load_config([good, bad])
    assert str(error.value) == f"{bad}: train.td_steps: expected a value >= 1, got 0"
    with pytest.raises(ConfigError) as error:
        load_config([bad, good])  # still bad.yaml's key: good.yaml does not set td_steps
    assert str(error.value).startswith(f"{bad}: train.td_steps:")


def test_shipped_configs_are_found_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert find_config("configs/tiny.yaml") == PROJECT_ROOT / "configs" / "tiny.yaml"
    assert load_config("configs/tiny.yaml").train.training_steps == 20  # configs/tiny.yaml says 20
    # A file of the same name under the current folder wins.
    (tmp_path / "configs").mkdir()
    _write(tmp_path / "configs", "tiny.yaml", "train:\n  training_steps: 7\n")
    assert load_config("configs/tiny.yaml").train.training_steps == 7
    with pytest.raises(ConfigError, match=r"^configs/nope.yaml: file not found \(nor under "):
        load_config("configs/nope.yaml")


def test_action_space_size_left_out_or_null_is_read_from_the_environment(tmp_path):
    left_out = _write(tmp_path, "left_out.yaml", "game:\n  id: CartPole-v1\n")
    null = _write(tmp_path, "null.yaml", "game:\n  id: CartPole-v1\n  action_space_size: null\n")
    # CartPole-v1 pushes the cart left or right: 2 actions.
    assert load_config(left_out).game.action_space_size == 2
    assert load_config(null).game.action_space_size == 2
    # Tic-tac-toe: 9 cells.
    assert (
        load_config(None, ["game.id=openspiel:tic_tac_toe", "search.two_player_rule=negamax"]).game.action_space_size
        == 9
    )


def test_a_given_action_space_size_is_checked_against_the_environment():
    config = load_config(TINY, ["game.action_space_size=3"])  # kept as given: nothing to infer
    assert config.game.action_space_size == 3
    with pytest.raises(EnvironmentSpecError, match="CartPole-v1 has 2 actions, but game.action_space_size is 3"):
        check_environment(config.game)


def test_game_kwargs_reach_the_environment_and_a_bad_one_is_one_line(tmp_path):
    config = load_config(TINY, ["game.kwargs.max_episode_steps=7"])
    assert config.game.kwargs == {"max_episode_steps": 7}
    from muzero.envs import make_environment

    env = make_environment(config.game, seed=0)
    env.reset()
    # The time limit of 7 steps came from game.kwargs: pushing the same way 7 times (CartPole
    # falls after ~9) ends with truncated on the 7th step at the latest.
    ended = [env.step(0)[2:] for _ in range(7)]
    assert any(terminated or truncated for terminated, truncated in ended)
    bad = _write(tmp_path, "bad.yaml", "game:\n  id: CartPole-v1\n  kwargs: {no_such_argument: 1}\n")
    with pytest.raises(ConfigError) as error:
        load_config(bad)  # action_space_size left out: the environment is made while loading
    message = str(error.value)
    assert message.startswith(f"{bad}: game.kwargs: CartPole-v1: ") and "no_such_argument" in message
    assert "\n" not in message


def test_a_missing_extra_is_one_line_naming_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *args: None if name == "ale_py" else real(name, *args)
    )
    config = load_config(ATARI_TINY)
    with pytest.raises(EnvironmentSpecError) as error:
        check_environment(config.game)
    assert "needs the Python package 'ale_py'" in str(error.value)
    assert "pip install -e '.[atari]'" in str(error.value)


def test_the_game_plugin_gives_its_settings_and_refuses_a_network_it_cannot_run():
    from muzero.config import GameConfig
    from muzero.envs import check_game_plugin
    from muzero.envs.atari import AtariSettings

    # CartPole (gymnasium) takes game.kwargs as given; Atari converts them to AtariSettings.
    assert check_game_plugin(GameConfig(id="CartPole-v1"), "mlp") is None
    assert check_game_plugin(GameConfig(id="ALE/Pong-v5"), "resnet") is AtariSettings
    with pytest.raises(EnvironmentSpecError, match="atari games need network.kind: resnet") as error:
        check_game_plugin(GameConfig(id="ALE/Pong-v5"), "mlp")
    assert error.value.key == "network.kind"
    with pytest.raises(EnvironmentSpecError, match="cannot import the game module 'no_such_module'") as error:
        check_game_plugin(GameConfig(id="no_such_module:make"), "mlp")
    assert error.value.key == "game.id"


def test_config_changes_lists_the_keys_that_differ_sorted():
    from muzero.config_loader import config_changes

    old = load_config(TINY)
    new = load_config(TINY, ["train.lr_init=0.5", "network.hidden_layers=[3]"])
    # Two keys changed, sorted by path: network.* before train.*; tuples compared as lists.
    assert config_changes(old, new) == {
        "network.hidden_layers": (list(old.network.hidden_layers), [3]),
        "train.lr_init": (old.train.lr_init, 0.5),
    }
    assert config_changes(old, old) == {}
