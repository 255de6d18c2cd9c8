"""muzero/networks/compat.py: the shapes that decide whether a checkpoint restores into a network."""

from __future__ import annotations

import dataclasses

import numpy as np

from muzero.config import NetworkConfig
from muzero.envs import EnvironmentSpec
from muzero.networks.compat import network_shapes, shape_changes


def _spec(observation_shape, actions, board=None) -> EnvironmentSpec:
    return EnvironmentSpec(
        observation_shape=observation_shape,
        observation_dtype=np.float32,
        action_space_size=actions,
        num_players=1,
        symmetries=(),
        board_shape=board,
    )


def test_mlp_shapes_name_each_weight_and_a_wider_state_changes_them():
    network = NetworkConfig(hidden_state_size=4, hidden_layers=(8,), support_size=5)
    old = network_shapes(network, _spec((4,), 2))
    # CartPole: 4 observations, 2 actions, state 4, one hidden layer of 8, 2 * 5 + 1 = 11 bins.
    assert old["network.kind"] == "mlp"
    assert old["representation/hidden_0/kernel"] == (4, 8)
    assert old["dynamics/hidden_0/kernel"] == (4 + 2, 8)
    assert old["prediction/value/kernel"] == (8, 11)
    new = network_shapes(NetworkConfig(hidden_state_size=5, hidden_layers=(8,), support_size=5), _spec((4,), 2))
    changes = shape_changes(old, new)
    # State 4 -> 5: the representation's state head (8, 4) -> (8, 5), the dynamics input 4 + 2 -> 5 + 2, ...
    assert "representation/state/kernel (8, 4) -> (8, 5)" in changes
    assert "dynamics/hidden_0/kernel (6, 8) -> (7, 8)" in changes
    assert changes == sorted(changes)
    assert shape_changes(old, network_shapes(network, _spec((4,), 2))) == []


def test_resnet_shapes_name_the_keys_and_the_board():
    network = NetworkConfig(kind="resnet", planes=16, blocks=2, downsample=False)
    board = network_shapes(network, _spec((27,), 9, board=(3, 3, 3)))
    # Tic-tac-toe: a flat observation of 3 planes of 3 x 3 = 27 numbers, 9 actions.
    assert board["board (planes, rows, cols)"] == (3, 3, 3)
    assert board["image shape"] == (27,) and board["game.action_space_size"] == 9
    # Images: no board entry; 4 stacked frames of [6, 6, 3] and their 4 action planes: 4 * 3 + 4 = 16.
    image = network_shapes(network, _spec((6, 6, 3), 4), stacked_frames=4)
    assert "board (planes, rows, cols)" not in image and image["image shape"] == (6, 6, 16)
    assert shape_changes(board, image)[0] == "board (planes, rows, cols) (3, 3, 3) -> None"
    # The dynamics' first convolution takes 1 action plane instead of 9: a resume must refuse it.
    planes = network_shapes(dataclasses.replace(network, action_planes="board"), _spec((27,), 9, board=(3, 3, 3)))
    assert shape_changes(board, planes) == ["network.action_planes tiled -> board"]
