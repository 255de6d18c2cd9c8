"""The learner's MLP evaluated with numpy, for self-play.

Why: a TensorFlow call costs ~300 us whatever its size, a numpy forward pass of a
CartPole-size MLP ~20 us, and the reference search calls the network once per
simulation; so self-play runs this mirror of `muzero.networks.mlp.MLPNetwork`'s
weights (tested equal to the Keras network). `variable_shapes` gives the MLP's weight
shapes without TensorFlow (the CLI compares them on resume).

With value prefix (a "lstm" layer in the dynamics), the hidden state is augmented as the
Keras network's, [B, H + 2u + 2] = [s, h, c, prefix, count] (`keras.ValuePrefixState`).
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
# The functions self-play evaluates.
FUNCTIONS = ("representation", "dynamics", "prediction")


class NumpyMLPNetwork(Network):
    """Numpy evaluation of `MLPNetwork`'s weights, for self-play.

    Args:
      weights: as returned by `MLPNetwork.get_weights()`.
      action_space_size: A.
      support_size: n (0: scalar value and reward heads).
      activation: "relu", "elu" or "tanh", as in the Keras model.
      steps: training steps behind these weights.
      value_transform: h(x) before the support (`network.value_transform`).
      value_prefix_horizon: `network.value_prefix_horizon` when the weights have a value-prefix
        LSTM (the dynamics' "lstm" layer, of 4u units), else ignored.
    """

    def __init__(
        self,
        weights: Weights,
        action_space_size: int,
        support_size: int,
        activation: str,
        steps: int = 0,
        value_transform: bool = True,
        value_prefix_horizon: int = 5,
    ):
        self._weights = {
            name: {layer: (np.asarray(k, np.float32), np.asarray(b, np.float32)) for layer, (k, b) in layers.items()}
            for name, layers in weights.items()
            if name in FUNCTIONS
        }
        # The consistency loss's heads (`network.projection_size`): carried, not evaluated.
        self._heads = {name: layers for name, layers in weights.items() if name not in FUNCTIONS}
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
        lstm = self._weights["dynamics"].get("lstm")
        self.lstm_units = 0 if lstm is None else len(lstm[1]) // 4  # 0: no value prefix
        self.value_prefix_horizon = value_prefix_horizon

    @property
    def weights(self) -> dict:
        """The weights as plain data, in `MLPNetwork.get_weights()` format (the consistency heads
        included, so that the compiled search's Keras copy loads them whole)."""
        return {**self._weights, **self._heads}

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
        output = self._predict(state, np.zeros(len(state), np.float32))
        if self.lstm_units:  # the root: LSTM state, prefix and count 0
            zeros = np.zeros((len(state), 2 * self.lstm_units + 2), np.float32)
            output = output._replace(hidden_state=np.concatenate([state, zeros], axis=-1))
        return output

    def recurrent_inference(self, hidden_state, action) -> NetworkOutput:
        action = np.asarray(action, np.int64)
        one_hot = np.eye(self.action_space_size, dtype=np.float32)[action]
        hidden_state = np.asarray(hidden_state, np.float32)
        u = self.lstm_units
        latent = hidden_state[:, : hidden_state.shape[1] - 2 * u - 2] if u else hidden_state
        x = self._trunk("dynamics", np.concatenate([latent, one_hot], axis=-1))
        state = scale_hidden_state_np(self._head("dynamics", "state", x))
        if not u:
            return self._predict(state, self._scalar(self._head("dynamics", "reward", x)))
        # Value prefix (`keras.py`): a count of 0 restarts the LSTM and the parent's prefix from 0.
        extra = hidden_state[:, -2 * u - 2 :]
        count = np.round(extra[:, -1])
        keep = (count != 0).astype(np.float32)
        h, c = extra[:, :u] * keep[:, None], extra[:, u : 2 * u] * keep[:, None]
        h, c = lstm_step(self._weights["dynamics"]["lstm"], x, h, c)
        prefix = self._scalar(self._head("dynamics", "reward", h))
        count = np.mod(count + 1.0, self.value_prefix_horizon)
        output = self._predict(state, prefix - extra[:, -2] * keep)
        augmented = np.concatenate([state, h, c, prefix[:, None], count[:, None]], axis=-1).astype(np.float32)
        return output._replace(hidden_state=augmented)

    def training_steps(self) -> int:
        return self._steps


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)


def lstm_step(weights: tuple, x: np.ndarray, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`keras.lstm_cell` in numpy: gates i, f, g, o = [x, h] @ kernel + bias;
    c' = sigmoid(f) c + sigmoid(i) tanh(g), h' = sigmoid(o) tanh(c'). [B, F], [B, u], [B, u] -> ([B, u], [B, u])."""
    kernel, bias = weights
    i, f, g, o = np.split(np.concatenate([x, h], axis=-1) @ kernel + bias, 4, axis=-1)
    c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
    return _sigmoid(o) * np.tanh(c), c


def variable_shapes(
    observation_size: int,
    action_space_size: int,
    hidden_state_size: int,
    hidden_layers: tuple[int, ...],
    support_size: int,
    lstm_hidden_size: int = 0,
) -> dict[str, tuple[int, ...]]:
    """Shapes of `MLPNetwork`'s weights by name, computed without TensorFlow.

    Args:
      lstm_hidden_size: u of the value prefix's LSTM; 0: no value prefix.

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
        if name == "dynamics" and lstm_hidden_size:
            u = lstm_hidden_size
            shapes["dynamics/lstm/kernel"], shapes["dynamics/lstm/bias"] = (width + u, 4 * u), (4 * u,)
        for head, units in heads.items():
            head_width = lstm_hidden_size if name == "dynamics" and head == "reward" and lstm_hidden_size else width
            shapes[f"{name}/{head}/kernel"], shapes[f"{name}/{head}/bias"] = (head_width, units), (units,)
    return shapes
