"""MuZero in TensorFlow 2, following DeepMind's pseudocode (revision 2) name by name.

The TensorFlow-free pieces (config, search, games, replay, storage, self-play) import
eagerly; the TensorFlow pieces (networks, training) are loaded on first use, so
`from muzero import run_mcts` does not pay for importing TensorFlow.
"""

from __future__ import annotations

import importlib

from muzero.config import KnownBounds, MuZeroConfig
from muzero.envs.base import Environment
from muzero.game import Game
from muzero.networks.base import Network, NetworkOutput, UniformNetwork, make_uniform_network
from muzero.replay import Batch, ReplayBuffer
from muzero.search.reference import (
    ActionHistory,
    MinMaxStats,
    Node,
    add_exploration_noise,
    backpropagate,
    expand_node,
    run_mcts,
    select_action,
    select_child,
    softmax_sample,
    ucb_score,
)
from muzero.selfplay import play_game
from muzero.storage import SharedStorage

_LAZY = {
    "scale_gradient": "muzero.gradient_scaling",
    "scale_gradient_custom": "muzero.gradient_scaling",
    "scalar_loss": "muzero.training",
    "update_weights": "muzero.training",
    "train_network": "muzero.training",
    "Learner": "muzero.training",
    "MLPNetwork": "muzero.networks.mlp",
    "ResNetwork": "muzero.networks.resnet",
    "make_network": "muzero.networks",
    "run_batched_mcts": "muzero.search.batched",
    "make_searcher": "muzero.search",
}

__all__ = [
    "ActionHistory",
    "Batch",
    "Environment",
    "Game",
    "KnownBounds",
    "MinMaxStats",
    "MuZeroConfig",
    "Network",
    "NetworkOutput",
    "Node",
    "ReplayBuffer",
    "SharedStorage",
    "UniformNetwork",
    "add_exploration_noise",
    "backpropagate",
    "expand_node",
    "make_uniform_network",
    "play_game",
    "run_mcts",
    "select_action",
    "select_child",
    "softmax_sample",
    "ucb_score",
] + list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'muzero' has no attribute {name!r}")
