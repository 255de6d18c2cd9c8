"""Shared test helpers."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest

from muzero.config import GameConfig, MuZeroConfig, NetworkConfig, SearchConfig, TrainConfig


@pytest.fixture
def tiny_config() -> MuZeroConfig:
    """A small CartPole-shaped config for unit tests."""
    return MuZeroConfig(
        game=GameConfig(id="CartPole-v1", action_space_size=2, max_moves=20, discount=0.9),
        search=SearchConfig(num_simulations=5),
        network=NetworkConfig(hidden_state_size=4, hidden_layers=(8,), support_size=3),
        train=TrainConfig(batch_size=4, num_unroll_steps=3, td_steps=2, weight_decay=0.0, lr_init=0.01),
    )
