"""Network families: the one place that chooses which one a config builds.

* `base.py`: the pseudocode's `Network` interface, `NetworkOutput`, `UniformNetwork`,
  `PublishedWeights` (TensorFlow-free).
* `numpy_mlp.py`: the MLP's weights evaluated with numpy, for self-play (TensorFlow-free).
* `compat.py`: the shapes a run's network has, and what a resume's new config changed in them.
* `keras.py`: what the Keras families share; `mlp.py` and `resnet.py`: the families the
  learner trains (`network.kind`: "mlp" or "resnet").

Only `make_network` imports TensorFlow, on its first call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from muzero.networks.base import Network, NetworkOutput, PublishedWeights, UniformNetwork, make_uniform_network

if TYPE_CHECKING:
    from muzero.config import NetworkConfig
    from muzero.envs import EnvironmentSpec
    from muzero.networks.keras import KerasNetwork

__all__ = ["Network", "NetworkOutput", "PublishedWeights", "UniformNetwork", "make_network", "make_uniform_network"]


def make_network(
    network: NetworkConfig, spec: EnvironmentSpec, stacked_frames: int = 1, mixed_precision: bool = False
) -> KerasNetwork:
    """The Keras network `network.kind` names, for the game `spec` describes (uint8 frames are
    scaled by the network).

    Args:
      network: the `network` section.
      spec: the game's observations (shape, dtype, and the board of a flat board-game
        observation, which a resnet sees as an image), and its action count.
      stacked_frames: `game.stacked_frames` (image games: frames and actions per observation).
      mixed_precision: `train.mixed_precision` (resnet: bfloat16 compute).
    """
    if network.kind == "resnet":
        from muzero.networks.resnet import ResNetwork, board_action_planes

        board, action_planes = None, None
        if len(spec.observation_shape) == 1:
            board = spec.board_shape
            if board is None:  # `check_environment` says so first, in one line
                raise ValueError(
                    f"network.kind resnet needs image or board observations; {spec.observation_shape} is neither"
                )
        if network.action_planes == "board":  # `check_environment` refuses it without a board's actions
            action_planes = board_action_planes(spec.board_actions, *spec.board_shape[1:])
        return ResNetwork(
            network,
            spec.action_space_size,
            spec.observation_shape,
            spec.observation_dtype,
            stacked_frames,
            mixed_precision,
            board_shape=board,
            action_planes=action_planes,
        )
    from muzero.networks.mlp import MLPNetwork

    return MLPNetwork(network, spec.action_space_size, int(np.prod(spec.observation_shape)))
