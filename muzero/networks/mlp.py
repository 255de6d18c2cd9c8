"""The MLP network family, for vector observations (CartPole).

* representation: observation -> hidden layers -> "state" [H], min-max scaled.
* dynamics: [hidden_state, one_hot(action)] -> hidden layers -> "state" [H]
  (min-max scaled) and "reward" (2n + 1 logits, or 1 scalar).
* prediction: hidden_state -> hidden layers -> "policy" [A] and "value".

Layer names are part of the weight format shared with `NumpyMLPNetwork`.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from muzero.config import NetworkConfig
from muzero.networks.base import NetworkOutput
from muzero.networks.keras import KerasNetwork, scale_hidden_state
from muzero.networks.numpy_mlp import NumpyMLPNetwork
from muzero.support import num_bins


def _mlp(name: str, input_size: int, hidden_layers, activation: str, heads: dict[str, int]) -> keras.Model:
    inputs = keras.Input((input_size,), name=f"{name}_input")
    x = inputs
    for i, width in enumerate(hidden_layers):
        x = keras.layers.Dense(width, activation=activation, name=f"hidden_{i}")(x)
    outputs = {head: keras.layers.Dense(size, name=head)(x) for head, size in heads.items()}
    return keras.Model(inputs, outputs, name=name)


class MLPNetwork(KerasNetwork):
    """The three functions as Keras models, with the pseudocode's inference interface.

    Args:
      net: the `network` config section.
      action_space_size: A.
      observation_size: flattened observation length (4 for CartPole).
    """

    def __init__(self, net: NetworkConfig, action_space_size: int, observation_size: int):
        self.observation_spec = tf.TensorSpec([None, observation_size], tf.float32)
        self.hidden_shape = (net.hidden_state_size,)
        self.action_space_size = action_space_size
        self.support_size = net.support_size
        self.value_transform = net.value_transform
        self.activation = net.activation
        bins = num_bins(net.support_size)
        size = net.hidden_state_size
        self.representation = _mlp(
            "representation", observation_size, net.hidden_layers, net.activation, {"state": size}
        )
        self.dynamics = _mlp(
            "dynamics",
            size + self.action_space_size,
            net.hidden_layers,
            net.activation,
            {"state": size, "reward": bins},
        )
        self.prediction = _mlp(
            "prediction", size, net.hidden_layers, net.activation, {"policy": self.action_space_size, "value": bins}
        )
        self.steps = 0

    # `training` is part of the interface shared with `ResNetwork`; no layer here depends on it.
    def represent(self, observation, training: bool = False) -> tf.Tensor:
        """The representation function alone: [B, *observation_shape] -> scaled hidden state [B, H]."""
        x = tf.reshape(tf.convert_to_tensor(observation, tf.float32), (tf.shape(observation)[0], -1))
        return scale_hidden_state(self.representation(x)["state"])

    def initial_inference(self, observation, training: bool = False) -> NetworkOutput:
        state = self.represent(observation, training)
        reward = tf.zeros(tf.shape(state)[:1])
        # The initial step has no incoming transition: its reward is 0 and carries no gradient.
        reward_logits = None
        return self._predict(state, reward, reward_logits)

    def recurrent_inference(self, hidden_state, action, training: bool = False) -> NetworkOutput:
        one_hot = tf.one_hot(tf.cast(action, tf.int32), self.action_space_size)
        out = self.dynamics(tf.concat([hidden_state, one_hot], axis=-1))
        state = scale_hidden_state(out["state"])
        reward_logits = out["reward"] if self.support_size else out["reward"][:, 0]
        return self._predict(state, self._scalar(out["reward"]), reward_logits)

    def get_weights(self) -> dict:
        """Weights as plain numpy data: {function: {layer: (kernel, bias)}}."""
        return {
            name: {
                layer.name: tuple(np.array(w) for w in layer.get_weights())
                for layer in model.layers
                if layer.get_weights()
            }
            for name, model in self.models.items()
        }

    def set_weights(self, weights: dict) -> None:
        for name, model in self.models.items():
            for layer_name, values in weights[name].items():
                model.get_layer(layer_name).set_weights(list(values))

    def published_network(self, steps: int | None = None) -> NumpyMLPNetwork:
        """The network as published to self-play: a numpy copy of the current weights (`NumpyMLPNetwork`)."""
        return NumpyMLPNetwork(
            self.get_weights(),
            self.action_space_size,
            self.support_size,
            self.activation,
            self.steps if steps is None else steps,
            self.value_transform,
        )
