"""Shared test helpers, and a hermetic environment for every test.

Nothing a test runs may read from or write to the user's home folder: the suite must
pass on a fresh machine (CI runs it with HOME pointing at a new, empty folder). So,
before any test (or any library) starts, this module points every per-user location
the project's libraries know of at one temporary folder of the session, and makes the
Ray authentication token the tests' clusters and drivers use there. Subprocesses
(`muzero ...`, `ray start`) inherit these variables.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path

_SESSION_HOME = Path(tempfile.mkdtemp(prefix="muzero-tests-"))


def _hermetic_environment() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # Caches and settings that Keras, matplotlib and others keep under ~ by default.
    for variable, folder in (
        ("KERAS_HOME", "keras"),
        ("MPLCONFIGDIR", "matplotlib"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_CONFIG_HOME", "config"),
    ):
        os.environ[variable] = str(_SESSION_HOME / folder)
        (_SESSION_HOME / folder).mkdir()
    # Ray: no usage reports, and the token of the tests' own clusters. Ray reads a token
    # from RAY_AUTH_TOKEN_PATH before ~/.ray/auth_token, so neither `ray start` nor a
    # local `ray.init()` looks in (or writes a new token into) the user's home.
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    token = _SESSION_HOME / "ray_auth_token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(token)
    os.environ.pop("RAY_AUTH_TOKEN", None)  # a token of the user's own would win over the file


_hermetic_environment()

import pytest

from muzero.config import GameConfig, MuZeroConfig, NetworkConfig, SearchConfig, TrainConfig
from tests.helpers import ATARI_TINY, TICTACTOE, TINY, TINY_RUN_SETTINGS, muzero_command


@pytest.fixture
def tiny_config() -> MuZeroConfig:
    """A small CartPole-shaped config for unit tests."""
    return MuZeroConfig(
        game=GameConfig(id="CartPole-v1", action_space_size=2, max_moves=20, discount=0.9),
        search=SearchConfig(num_simulations=5),
        network=NetworkConfig(hidden_state_size=4, hidden_layers=(8,), support_size=3),
        train=TrainConfig(batch_size=4, num_unroll_steps=3, td_steps=2, weight_decay=0.0, lr_init=0.01),
    )


# Runs that several tests read: each is trained once per session (per xdist worker) by the
# real command. Tests that change a run work on a copy (`copy_run`).


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """`muzero train --config configs/tiny.yaml` for 30 steps, a checkpoint every 5 (25, 30 and
    20 kept), one game at a time (the reference search): seed 0."""
    run_dir = tmp_path_factory.mktemp("shared") / "tiny"
    result = muzero_command("train", "--config", TINY, "--logdir", str(run_dir), *TINY_RUN_SETTINGS)
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir / "train.stderr").write_text(result.stderr)
    return run_dir


@pytest.fixture(scope="session")
def atari_tiny_run(tmp_path_factory) -> Path:
    """`muzero train --config configs/atari/tiny.yaml` as it is (6 steps, a checkpoint every 3)."""
    run_dir = tmp_path_factory.mktemp("shared") / "atari"
    result = muzero_command("train", "--config", ATARI_TINY, "--logdir", str(run_dir))
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir / "train.stderr").write_text(result.stderr)
    return run_dir


@pytest.fixture(scope="session")
def tictactoe_tiny_run(tmp_path_factory) -> Path:
    """`configs/tictactoe.yaml` shrunk to seconds: 20 steps, 4 simulations, the numpy search,
    one evaluation against the random player at step 20 (4 games)."""
    run_dir = tmp_path_factory.mktemp("shared") / "tictactoe"
    settings = [
        "train.training_steps=20",
        "train.checkpoint_interval=10",
        "search.num_simulations=4",
        "selfplay.num_envs=4",
        "selfplay.search=numpy",
        "replay.min_games=4",
        "train.batch_size=16",
        "run.eval_interval=20",
        "run.eval_opponents=[random]",
        "run.eval_games=4",
    ]
    result = muzero_command(
        "train",
        "--config",
        TICTACTOE,
        "--logdir",
        str(run_dir),
        *(arg for setting in settings for arg in ("--set", setting)),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir / "train.stderr").write_text(result.stderr)
    return run_dir
