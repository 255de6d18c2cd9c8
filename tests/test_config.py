"""Tests for muzero/config.py and muzero/config_io.py: loading, overrides, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from muzero.config import KnownBounds, MuZeroConfig
from muzero.config_io import ConfigError, config_to_yaml
from muzero.config_loader import load_config

ROOT = Path(__file__).resolve().parents[1]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def _error(path, overrides=()) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("name", ["cartpole.yaml", "tiny.yaml"])
def test_shipped_configs_load(name):
    config = load_config(ROOT / "configs" / name)
    assert config.game.id == "CartPole-v1" and config.action_space_size == 2


def test_cartpole_reanalyse_overlay_is_the_measured_command():
    # docs/reanalyse.md, "Searching from a random mirror image": bench_cartpole.py's command
    # with these --set overrides on configs/cartpole.yaml; the overlay must give the same config.
    measured = [
        "reanalyse.fraction=0.8",
        "reanalyse.positions_per_step=64",
        "reanalyse.batch_size=256",
        "train.steps_per_move=1.0",
        "reanalyse.td_steps=20",
        "train.training_steps=16000",
        "replay.augment_symmetries=true",
        "selfplay.segment_length=25",
        "train.td_steps=20",
        "search.random_symmetry=true",
    ]
    cartpole = ROOT / "configs" / "cartpole.yaml"
    overlay = load_config([cartpole, ROOT / "configs" / "cartpole_reanalyse.yaml"])
    assert overlay == load_config(cartpole, measured)
    assert overlay != load_config(cartpole)


@pytest.mark.parametrize("name", ["pong", "breakout"])
def test_atari_configs_hold_the_papers_constants(name):
    config = load_config(ROOT / "configs" / "atari" / f"{name}.yaml")
    # The paper (appendix and pseudocode), Atari: 18 actions, 27,000 moves, discount 0.997, alpha 0.25, 50 simulations, batch
    # 1,024, td_steps 10, K 5, lr 0.05 decaying by 0.1 over 350e3 steps, temperature 1 / 0.5 / 0.25 at
    # 500k / 750k; 32 stacked frames, action repeat 4, 96x96, 601 bins, 16 blocks of 256 planes;
    # prioritized replay with alpha = beta = 1.
    assert config.game.id == f"ALE/{name.capitalize()}-v5" and config.action_space_size == 18
    assert (config.max_moves, config.discount, config.search.root_dirichlet_alpha) == (27_000, 0.997, 0.25)
    assert config.search.num_simulations == 50
    train = config.train
    assert (train.batch_size, train.td_steps, train.num_unroll_steps) == (1024, 10, 5)
    assert (train.lr_init, train.lr_decay_rate, train.lr_decay_steps) == (0.05, 0.1, 350_000)
    assert config.search.visit_softmax_temperature.schedule == ((500_000, 1.0), (750_000, 0.5), (None, 0.25))
    assert config.game.stacked_frames == 32 and config.game.kwargs.frame_skip == 4
    assert config.game.kwargs.screen_size == 96 and config.network.support_size == 300
    assert (config.network.kind, config.network.blocks, config.network.planes) == ("resnet", 16, 256)
    assert (config.replay.priority_alpha, config.replay.priority_beta) == (1.0, 1.0)  # prioritized replay
    assert config.replay.normalize_importance_weights  # the commented deviation


def test_resnet_needs_the_compiled_batched_search_and_atari_needs_the_resnet():
    atari = ROOT / "configs" / "atari" / "tiny.yaml"
    assert "selfplay.batched: true and selfplay.search: compiled" in _error(atari, ["selfplay.search=numpy"])
    assert "game.stacked_frames: stacked frames are images: they need network.kind: resnet" in _error(
        atari, ["network.kind=mlp"]
    )
    assert "atari games need network.kind: resnet" in _error(atari, ["network.kind=mlp", "game.stacked_frames=1"])


def test_defaults_are_the_pseudocodes():
    config = MuZeroConfig()
    # The pseudocode: 0.25, 19652, 1.25, 5, 1e-4, 0.9, 0.1, window of 1e6 games, checkpoint every 1000.
    assert config.search.root_exploration_fraction == 0.25
    assert (config.search.pb_c_base, config.search.pb_c_init) == (19652, 1.25)
    assert config.train.num_unroll_steps == 5 and config.train.weight_decay == 1e-4
    assert config.train.momentum == 0.9 and config.train.lr_decay_rate == 0.1
    assert config.replay.window_size == 1_000_000 and config.train.checkpoint_interval == 1000


def test_prioritized_replay_off_by_default_paper_values_accepted():
    replay = MuZeroConfig().replay
    # alpha 0: today's uniform sampling; beta 1 as the paper; epsilon small and positive.
    assert replay.priority_alpha == 0.0 and replay.priority_beta == 1.0 and 0.0 < replay.priority_epsilon < 0.01
    config = load_config(None, ["replay.priority_alpha=1", "replay.priority_beta=1", "replay.priority_epsilon=0.01"])
    assert (config.replay.priority_alpha, config.replay.priority_beta, config.replay.priority_epsilon) == (
        1.0,
        1.0,
        0.01,
    )
    # Epsilon 0 is refused with priorities on (a priority-0 position has P = 0 and, drawn by
    # rounding, an infinite weight), and accepted with them off.
    assert "replay.priority_epsilon: expected a value > 0 with replay.priority_alpha > 0" in _error(
        None, ["replay.priority_alpha=1", "replay.priority_epsilon=0"]
    )
    assert load_config(None, ["replay.priority_epsilon=0"]).replay.priority_epsilon == 0.0
    # Adam's bias correction divides by 1 - beta_1^t: a momentum (its beta_1) of 1 is refused with
    # Adam, and allowed with SGD (the range of momentum is [0, 1]).
    assert "train.momentum: expected a value < 1 with train.optimizer: adam" in _error(
        None, ["train.optimizer=adam", "train.momentum=1"]
    )
    assert load_config(None, ["train.momentum=1"]).train.momentum == 1.0


def test_values_and_overrides(tmp_path):
    path = _write(
        tmp_path, "train:\n  batch_size: 32\n  weight_decay: 1e-4\nsearch:\n  known_bounds: {min: -1, max: 1}\n"
    )
    config = load_config(path, ["train.batch_size=64", "network.hidden_layers=[16, 16]", "search.pb_c_init=2"])
    # "1e-4" is a string to YAML 1.1; it is accepted as the number 0.0001.
    assert config.train.weight_decay == 1e-4
    assert config.train.batch_size == 64 and config.network.hidden_layers == (16, 16)
    assert config.search.known_bounds == KnownBounds(-1.0, 1.0) and config.search.pb_c_init == 2.0


def test_saved_yaml_loads_back_equal(tmp_path):
    config = load_config(ROOT / "configs" / "cartpole.yaml", ["train.td_steps=7"])
    path = _write(tmp_path, config_to_yaml(config))
    assert load_config(path) == config


def test_unknown_key_with_did_you_mean(tmp_path):
    path = _write(tmp_path, "train:\n  batch_sise: 32\n")
    assert _error(path) == f"{path}: train.batch_sise: unknown key (did you mean 'batch_size'?)"


def test_unknown_section(tmp_path):
    path = _write(tmp_path, "trian:\n  batch_size: 32\n")
    assert _error(path) == f"{path}: trian: unknown key (did you mean 'train'?)"
    # A section named only by a --set is the --set's error.
    path = _write(tmp_path, "train:\n  batch_size: 32\n")
    assert (
        _error(path, ["nosuch.x=3"]) == "--set nosuch.x=3: nosuch: unknown key (expected one of: game, search, "
        "selfplay, network, train, replay, run, actors, reanalyse)"
    )


def test_the_built_in_defaults_are_asked_for_by_name(tmp_path, monkeypatch):
    # `--config defaults` is the built-in defaults; an empty file is refused (muzero train exits 2).
    assert load_config("defaults", ["train.batch_size=8"]) == load_config(None, ["train.batch_size=8"])
    assert "empty config (no sections)" in _error(_write(tmp_path, ""))
    # A file of that name is reached by a path.
    monkeypatch.chdir(tmp_path)
    Path("defaults").write_text("train:\n  batch_size: 16\n")
    assert load_config("./defaults").train.batch_size == 16


def test_wrong_type(tmp_path):
    path = _write(tmp_path, "train:\n  batch_size: lots\n")
    assert _error(path) == f"{path}: train.batch_size: expected an integer, got a string 'lots'"
    path = _write(tmp_path, "train:\n  batch_size: 12.5\n")
    assert _error(path) == f"{path}: train.batch_size: expected an integer, got a number 12.5"


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("game.discount", "1.5", "expected a value <= 1.0, got 1.5"),
        ("search.num_simulations", "0", "expected a value >= 1, got 0"),
        ("train.num_unroll_steps", "0", "expected a value >= 1, got 0"),
        ("train.td_steps", "-3", "expected a value >= 1, got -3"),
        ("train.batch_size", "0", "expected a value >= 1, got 0"),
        ("train.lr_init", "-0.1", "expected a value > 0.0, got -0.1"),
        ("network.activation", "gelu", "expected one of 'relu', 'elu', 'tanh', got 'gelu'"),
        ("replay.priority_alpha", "-0.5", "expected a value >= 0.0, got -0.5"),
        ("replay.priority_beta", "1.5", "expected a value <= 1.0, got 1.5"),
        ("replay.priority_beta", "-1", "expected a value >= 0.0, got -1.0"),
        ("replay.priority_epsilon", "-1e-6", "expected a value >= 0.0, got -1e-06"),
    ],
)
def test_out_of_range_in_yaml_and_in_set(tmp_path, key, value, expected):
    section, name = key.split(".")
    path = _write(tmp_path, f"{section}:\n  {name}: {value}\n")
    assert _error(path) == f"{path}: {key}: {expected}"
    # The same problem from --set names the override instead of the file.
    assert _error(None, [f"{key}={value}"]) == f"--set {key}={value}: {key}: {expected}"


def test_set_errors():
    assert (
        _error(None, ["train.batch_sise=3"])
        == "--set train.batch_sise=3: train.batch_sise: unknown key (did you mean 'batch_size'?)"
    )
    assert _error(None, ["train.batch_size"]).startswith("--set train.batch_size: expected KEY=VALUE")
    assert (
        _error(None, ["train.batch_size=abc"])
        == "--set train.batch_size=abc: train.batch_size: expected an integer, got a string 'abc'"
    )


def test_file_problems(tmp_path):
    assert _error(tmp_path / "missing.yaml") == f"{tmp_path / 'missing.yaml'}: file not found"
    path = _write(tmp_path, "train:\n  batch_size: [1, 2\n")
    assert _error(path).startswith(f"{path}: malformed YAML: line ")
    path = _write(tmp_path, "- 1\n- 2\n")
    assert _error(path) == f"{path}: expected a mapping of sections at top level, got a list"


def test_schedule_and_bounds_consistency(tmp_path):
    path = _write(tmp_path, "search:\n  visit_softmax_temperature:\n    schedule: [[10, 1.0], [5, 0.5]]\n")
    assert _error(path) == (
        f"{path}: search.visit_softmax_temperature.schedule[1]: thresholds must increase, got 5 after 10"
    )
    path = _write(tmp_path, "search:\n  known_bounds: {min: 1, max: 1}\n")
    assert _error(path) == f"{path}: search.known_bounds: expected min < max, got min=1.0, max=1.0"
