"""Whether a run's checkpoint fits a new config's network: the shapes that decide it, without
TensorFlow, named by the config keys that set them.

`muzero train --resume` refuses a config whose network would not restore the checkpoint's
weights (a different width, depth, support or game), and says which key changed:

    representation/state/kernel (8, 4) -> (8, 5); dynamics/hidden_0/kernel (6, 8) -> (7, 8)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from muzero.networks.base import image_shape
from muzero.networks.numpy_mlp import variable_shapes

if TYPE_CHECKING:
    from muzero.config import NetworkConfig
    from muzero.envs import EnvironmentSpec


def network_shapes(network: NetworkConfig, spec: EnvironmentSpec, stacked_frames: int = 1) -> dict[str, Any]:
    """What fixes the shapes of the weights `network` builds for the game `spec` describes.

    The MLP's weights are listed one by one (`numpy_mlp.variable_shapes`); the resnet's by
    the keys and input shapes that set them, as a resnet's variables are many.

    Args:
      network: the `network` section.
      spec: the game's observation shape, board (flat board-game observations) and actions.
      stacked_frames: `game.stacked_frames`.

    Returns:
      {name: shape or value}, e.g. {"network.kind": "mlp", "representation/hidden_0/kernel": (4, 8), ...}.
    """
    if network.kind == "resnet":
        board = {}
        if len(spec.observation_shape) == 1:  # a board game: the board's planes, rows and columns
            board = {"board (planes, rows, cols)": spec.board_shape}
        return {
            "network.kind": network.kind,
            "image shape": image_shape(stacked_frames, spec.observation_shape),
            **board,
            "network.downsample": network.downsample,
            "network.action_planes": network.action_planes,
            "game.action_space_size": spec.action_space_size,
            "network.planes": network.planes,
            "network.blocks": network.blocks,
            "network.hidden_layers": network.hidden_layers,
            "network.support_size": network.support_size,
            "network.value_prefix": network.value_prefix,
            "network.lstm_hidden_size": network.lstm_hidden_size if network.value_prefix else None,
        }
    return {
        "network.kind": network.kind,
        **variable_shapes(
            math.prod(spec.observation_shape),
            spec.action_space_size,
            network.hidden_state_size,
            network.hidden_layers,
            network.support_size,
            network.lstm_hidden_size if network.value_prefix else 0,
        ),
    }


def shape_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The entries of two `network_shapes` that differ, sorted: ["network.planes 64 -> 32", ...].
    Empty when a checkpoint of the `old` network restores into the `new` one."""
    return [
        f"{name} {old.get(name)} -> {new.get(name)}"
        for name in sorted(set(old) | set(new))
        if old.get(name) != new.get(name)
    ]
