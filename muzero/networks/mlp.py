"""The MLP network family, for vector observations (CartPole).

* representation: observation -> hidden layers -> "state" [H], min-max scaled.
* dynamics: [hidden_state, one_hot(action)] -> hidden layers -> "state" [H]
  (min-max scaled) and "reward" (2n + 1 logits, or 1 scalar).
* prediction: hidden_state -> hidden layers -> "policy" [A] and "value".

With `network.value_prefix`, the dynamics also takes the LSTM state [2u] ("lstm_state" input):
its last hidden layer feeds an LSTM cell ("lstm", `keras.lstm_cell`), whose output h' feeds
the "reward" head (now the value prefix); it returns the new "lstm_state" [2u]. The hidden
state the searches carry is then [B, H + 2u + 2] (`keras.ValuePrefixState`).

Layer names are part of the weight format shared with `NumpyMLPNetwork`.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from muzero.config import NetworkConfig
from muzero.networks.base import NetworkOutput
from muzero.networks.keras import KerasNetwork, lstm_cell, scale_hidden_state
from muzero.networks.numpy_mlp import NumpyMLPNetwork
from muzero.support import num_bins


def _mlp(
    name: str,
    input_size: int,
    hidden_layers,
    activation: str,
    heads: dict[str, int],
    lstm_units: int = 0,
    init_zero: bool = False,
) -> keras.Model:
    """Hidden layers, then one Dense per head; with `lstm_units` u > 0 (the value-prefix dynamics),
    a second input "lstm_state" [2u], an LSTM cell over the last hidden layer, the "reward" head on
    its output, and the new "lstm_state" output. `init_zero` (`network.init_zero`): the reward,
    value and policy heads start at zero (the hidden state's output keeps Keras's default)."""
    inputs = keras.Input((input_size,), name=f"{name}_input")
    x = inputs
    for i, width in enumerate(hidden_layers):
        x = keras.layers.Dense(width, activation=activation, name=f"hidden_{i}")(x)

    def dense(head: str, size: int):
        zero = init_zero and head != "state"
        return keras.layers.Dense(size, name=head, kernel_initializer="zeros" if zero else "glorot_uniform")

    if lstm_units == 0:
        outputs = {head: dense(head, size)(x) for head, size in heads.items()}
        return keras.Model(inputs, outputs, name=name)
    lstm_input = keras.Input((2 * lstm_units,), name="lstm_state")
    h, lstm_state = lstm_cell(x, lstm_input, lstm_units)
    outputs = {head: dense(head, size)(h if head == "reward" else x) for head, size in heads.items()}
    return keras.Model([inputs, lstm_input], {**outputs, "lstm_state": lstm_state}, name=name)


class MLPNetwork(KerasNetwork):
    """The three functions as Keras models, with the pseudocode's inference interface.

    Args:
      net: the `network` config section.
      action_space_size: A.
      observation_size: flattened observation length (4 for CartPole).
    """

    def __init__(self, net: NetworkConfig, action_space_size: int, observation_size: int):
        self.observation_spec = tf.TensorSpec([None, observation_size], tf.float32)
        self.latent_shape = self.hidden_shape = (net.hidden_state_size,)
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
            net.lstm_hidden_size if net.value_prefix else 0,
            net.init_zero,
        )
        heads = {"policy": self.action_space_size, "value": bins}
        self.prediction = _mlp("prediction", size, net.hidden_layers, net.activation, heads, init_zero=net.init_zero)
        self.steps = 0
        if net.value_prefix:
            self._enable_value_prefix(net.lstm_hidden_size, net.value_prefix_horizon)
        if net.projection_size:
            self._enable_projection(net.projection_size)

    # `training` is part of the interface shared with `ResNetwork`; no layer here depends on it.
    def represent(self, observation, training: bool = False) -> tf.Tensor:
        """The representation function alone: [B, *observation_shape] -> scaled hidden state [B, H]."""
        x = tf.reshape(tf.convert_to_tensor(observation, tf.float32), (tf.shape(observation)[0], -1))
        return scale_hidden_state(self.representation(x)["state"])

    def initial_inference(self, observation, training: bool = False) -> NetworkOutput:
        """observation [B, ...] -> NetworkOutput; hidden state [B, H] ([B, H + 2u + 2] with value prefix)."""
        state = self.represent(observation, training)
        reward = tf.zeros(tf.shape(state)[:1])
        # The initial step has no incoming transition: its reward is 0 and carries no gradient.
        reward_logits = None
        return self._predict(state, reward, reward_logits, hidden_state=self._initial_state(state))

    def recurrent_inference(self, hidden_state, action, training: bool = False) -> NetworkOutput:
        """hidden_state [B, *hidden_shape], action [B] -> NetworkOutput (value prefix: see `keras.py`)."""
        inputs = self._dynamics_inputs(hidden_state)
        latent, lstm_state = inputs[:2]
        x = tf.concat([latent, tf.one_hot(tf.cast(action, tf.int32), self.action_space_size)], axis=-1)
        out = self.dynamics(x if lstm_state is None else [x, lstm_state])
        return self._recurrent_output(out, inputs, scale_hidden_state(out["state"]), training)

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
            self.value_prefix_horizon,
        )
