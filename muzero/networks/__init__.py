"""Network families: the one place that chooses which one a config builds.

* `base.py`: the pseudocode's `Network` interface, `NetworkOutput`, `UniformNetwork`,
  `PublishedWeights` (TensorFlow-free).
* `numpy_mlp.py`: the MLP's weights evaluated with numpy, for self-play (TensorFlow-free).
* `keras.py`: what the Keras families share; `mlp.py` and `resnet.py`: the families the
  learner trains (`network.kind`: "mlp" or "resnet").

Only `make_network` imports TensorFlow, on its first call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from muzero.networks.base import Network, NetworkOutput, PublishedWeights, UniformNetwork, make_uniform_network

if TYPE_CHECKING:
    from muzero.config import MuZeroConfig
    from muzero.networks.keras import KerasNetwork

__all__ = ["Network", "NetworkOutput", "PublishedWeights", "UniformNetwork", "make_network", "make_uniform_network"]


def make_network(
    config: MuZeroConfig, observation_shape: tuple[int, ...], observation_dtype: type = np.float32
) -> KerasNetwork:
    """The Keras network `network.kind` names, for environment observations of `observation_shape`
    and `observation_dtype` (uint8 frames are scaled by the network).

    A resnet on flat observations is for a board game: it sees them as the board its game
    plug-in describes (`GamePlugin.board_shape`)."""
    if config.network.kind == "resnet":
        from muzero.networks.resnet import ResNetwork

        board = None
        if len(observation_shape) == 1:
            from muzero.envs import board_shape_of

            board = board_shape_of(config.game)
            if board is None:  # `check_environment` says so first, in one line
                raise ValueError(f"network.kind resnet needs image or board observations; {config.game.id} has neither")
        return ResNetwork(
            config.network,
            config.action_space_size,
            observation_shape,
            observation_dtype,
            config.game.stacked_frames,
            config.train.mixed_precision,
            board_shape=board,
        )
    from muzero.networks.mlp import MLPNetwork

    return MLPNetwork(config.network, config.action_space_size, int(np.prod(observation_shape)))
