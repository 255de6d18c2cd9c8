"""The learner's MLP evaluated with numpy, for self-play.

Why: a TensorFlow call costs ~300 us whatever its size, a numpy forward pass of a
CartPole-size MLP ~20 us, and the reference search calls the network once per
simulation; so self-play runs this mirror of `muzero.networks.mlp.MLPNetwork`'s
weights (tested equal to the Keras network). `variable_shapes` gives the MLP's weight
shapes without TensorFlow (the CLI compares them on resume).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from muzero.networks.base import MIN_MAX_EPSILON, Network, NetworkOutput
from muzero.support import num_bins, support_to_scalar


def scale_hidden_state_np(state: np.ndarray) -> np.ndarray:
    """Min-max scaling of each row to [0, 1]; [B, H] -> [B, H]."""
    low = state.min(axis=-1, keepdims=True)
    high = state.max(axis=-1, keepdims=True)
    return (state - low) / np.maximum(high - low, MIN_MAX_EPSILON)


_ACTIVATIONS = {
    "relu": lambda x: np.maximum(x, 0.0),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
    "tanh": np.tanh,
}

# Weights as plain data: {function: {layer_name: (kernel [in, out], bias [out])}}.
Weights = Mapping[str, Mapping[str, tuple]]


class NumpyMLPNetwork(Network):
    """Numpy evaluation of `MLPNetwork`'s weights, for self-play.

    Args:
      weights: as returned by `MLPNetwork.get_weights()`.
      action_space_size: A.
      support_size: n (0: scalar value and reward heads).
      activation: "relu", "elu" or "tanh", as in the Keras model.
      steps: training steps behind these weights.
      value_transform: h(x) before the support (`network.value_transform`).
    """

    def __init__(
        self,
        weights: Weights,
        action_space_size: int,
        support_size: int,
        activation: str,
        steps: int = 0,
        value_transform: bool = True,
    ):
        self._weights = {
            name: {layer: (np.asarray(k, np.float32), np.asarray(b, np.float32)) for layer, (k, b) in layers.items()}
            for name, layers in weights.items()
        }
        self._hidden = {
            name: sorted(
                (layer for layer in layers if layer.startswith("hidden_")), key=lambda layer: int(layer.split("_")[1])
            )
            for name, layers in self._weights.items()
        }
        self.action_space_size = action_space_size
        self.support_size = support_size
        self.value_transform = value_transform
        self._activation = _ACTIVATIONS[activation]
        self._steps = steps

    @property
    def weights(self) -> dict:
        """The weights as plain data, in `MLPNetwork.get_weights()` format."""
        return self._weights

    def _trunk(self, name: str, x: np.ndarray) -> np.ndarray:
        for layer in self._hidden[name]:
            kernel, bias = self._weights[name][layer]
            x = self._activation(x @ kernel + bias)
        return x

    def _head(self, name: str, head: str, x: np.ndarray) -> np.ndarray:
        kernel, bias = self._weights[name][head]
        return x @ kernel + bias

    def _scalar(self, head_output: np.ndarray) -> np.ndarray:
        if self.support_size == 0:
            return head_output[:, 0]
        logits = head_output - head_output.max(axis=-1, keepdims=True)
        probabilities = np.exp(logits)
        probabilities /= probabilities.sum(axis=-1, keepdims=True)
        return support_to_scalar(probabilities, self.support_size, self.value_transform).astype(np.float32)

    def _predict(self, hidden_state: np.ndarray, reward: np.ndarray) -> NetworkOutput:
        x = self._trunk("prediction", hidden_state)
        return NetworkOutput(
            value=self._scalar(self._head("prediction", "value", x)),
            reward=reward,
            policy_logits=self._head("prediction", "policy", x),
            hidden_state=hidden_state,
        )

    def initial_inference(self, observation) -> NetworkOutput:
        x = np.asarray(observation, np.float32).reshape(len(observation), -1)
        state = scale_hidden_state_np(self._head("representation", "state", self._trunk("representation", x)))
        return self._predict(state, np.zeros(len(state), np.float32))

    def recurrent_inference(self, hidden_state, action) -> NetworkOutput:
        action = np.asarray(action, np.int64)
        one_hot = np.eye(self.action_space_size, dtype=np.float32)[action]
        x = self._trunk("dynamics", np.concatenate([np.asarray(hidden_state, np.float32), one_hot], axis=-1))
        state = scale_hidden_state_np(self._head("dynamics", "state", x))
        reward = self._scalar(self._head("dynamics", "reward", x))
        return self._predict(state, reward)

    def training_steps(self) -> int:
        return self._steps


def variable_shapes(
    observation_size: int,
    action_space_size: int,
    hidden_state_size: int,
    hidden_layers: tuple[int, ...],
    support_size: int,
) -> dict[str, tuple[int, ...]]:
    """Shapes of `MLPNetwork`'s weights by name, computed without TensorFlow.

    Returns:
      {"function/layer/kernel" or ".../bias": shape}.
    """
    bins = num_bins(support_size)
    functions = {
        "representation": (observation_size, {"state": hidden_state_size}),
        "dynamics": (hidden_state_size + action_space_size, {"state": hidden_state_size, "reward": bins}),
        "prediction": (hidden_state_size, {"policy": action_space_size, "value": bins}),
    }
    shapes = {}
    for name, (width, heads) in functions.items():
        for i, units in enumerate(hidden_layers):
            shapes[f"{name}/hidden_{i}/kernel"], shapes[f"{name}/hidden_{i}/bias"] = (width, units), (units,)
            width = units
        for head, units in heads.items():
            shapes[f"{name}/{head}/kernel"], shapes[f"{name}/{head}/bias"] = (width, units), (units,)
    return shapes
