"""Keras networks the learner trains: representation h, dynamics g, prediction f.

`KerasNetwork` holds what every family shares; `make_network` builds the one the
config names (`network.kind`): the MLP below, or the resnet (`muzero.resnet`, Atari).

MLP family for vector observations (CartPole):

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

from muzero.config import MuZeroConfig
from muzero.network import MIN_MAX_EPSILON, Network, NetworkOutput, NumpyMLPNetwork
from muzero.support import support_to_scalar_tf


def scale_hidden_state(state: tf.Tensor) -> tf.Tensor:
    """Min-max scaling of each row to [0, 1] (paper appendix); [B, H] -> [B, H]."""
    low = tf.reduce_min(state, axis=-1, keepdims=True)
    high = tf.reduce_max(state, axis=-1, keepdims=True)
    return (state - low) / tf.maximum(high - low, MIN_MAX_EPSILON)


def _mlp(name: str, input_size: int, hidden_layers, activation: str, heads: dict[str, int]) -> keras.Model:
    inputs = keras.Input((input_size,), name=f"{name}_input")
    x = inputs
    for i, width in enumerate(hidden_layers):
        x = keras.layers.Dense(width, activation=activation, name=f"hidden_{i}")(x)
    outputs = {head: keras.layers.Dense(size, name=head)(x) for head, size in heads.items()}
    return keras.Model(inputs, outputs, name=name)


class KerasNetwork(Network):
    """What the Keras network families share: three Keras models, the support, the step count."""

    representation: keras.Model
    dynamics: keras.Model
    prediction: keras.Model
    support_size: int
    steps: int

    @property
    def models(self) -> dict[str, keras.Model]:
        return {"representation": self.representation, "dynamics": self.dynamics, "prediction": self.prediction}

    @property
    def trainable_variables(self) -> list:
        return [v for model in self.models.values() for v in model.trainable_variables]

    @property
    def non_trainable_variables(self) -> list:
        """Batch-norm moving averages (resnet); none in the MLP."""
        return [v for model in self.models.values() for v in model.non_trainable_variables]

    def _scalar(self, logits: tf.Tensor) -> tf.Tensor:
        if self.support_size == 0:
            return logits[:, 0]
        return support_to_scalar_tf(logits, self.support_size)

    def _predict(self, hidden_state: tf.Tensor, reward: tf.Tensor, reward_logits: tf.Tensor | None,
                 training: bool = False) -> NetworkOutput:
        """prediction(hidden_state) with the reward of the transition into it."""
        out = self.prediction(hidden_state, training=training)
        return NetworkOutput(
            value=self._scalar(out["value"]),
            reward=reward,
            policy_logits=out["policy"],
            hidden_state=hidden_state,
            value_logits=out["value"] if self.support_size else out["value"][:, 0],
            reward_logits=reward_logits,
        )

    def training_steps(self) -> int:
        return self.steps


class MLPNetwork(KerasNetwork):
    """The three functions as Keras models, with the pseudocode's inference interface.

    Args:
      config: uses network.*, game.action_space_size.
      observation_size: flattened observation length (4 for CartPole).
    """

    def __init__(self, config: MuZeroConfig, observation_size: int):
        net = config.network
        self.observation_spec = tf.TensorSpec([None, observation_size], tf.float32)
        self.hidden_shape = (net.hidden_state_size,)
        self.action_space_size = config.action_space_size
        self.support_size = net.support_size
        self.activation = net.activation
        bins = 2 * net.support_size + 1 if net.support_size else 1
        size = net.hidden_state_size
        self.representation = _mlp("representation", observation_size, net.hidden_layers, net.activation,
                                   {"state": size})
        self.dynamics = _mlp("dynamics", size + self.action_space_size, net.hidden_layers, net.activation,
                             {"state": size, "reward": bins})
        self.prediction = _mlp("prediction", size, net.hidden_layers, net.activation,
                               {"policy": self.action_space_size, "value": bins})
        self.steps = 0

    # `training` is part of the interface shared with `ResNetwork`; no layer here depends on it.
    def initial_inference(self, observation, training: bool = False) -> NetworkOutput:
        x = tf.reshape(tf.convert_to_tensor(observation, tf.float32), (tf.shape(observation)[0], -1))
        state = scale_hidden_state(self.representation(x)["state"])
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
        return {name: {layer.name: tuple(np.array(w) for w in layer.get_weights())
                       for layer in model.layers if layer.get_weights()}
                for name, model in self.models.items()}

    def set_weights(self, weights: dict) -> None:
        for name, model in self.models.items():
            for layer_name, values in weights[name].items():
                model.get_layer(layer_name).set_weights(list(values))

    def numpy_network(self, steps: int | None = None) -> NumpyMLPNetwork:
        """A numpy copy of the current weights for self-play."""
        return NumpyMLPNetwork(self.get_weights(), self.action_space_size, self.support_size,
                               self.activation, self.steps if steps is None else steps)


def make_network(config: MuZeroConfig, observation_shape: tuple[int, ...]) -> Network:
    """The Keras network `config.network.kind` names, for environment observations of `observation_shape`."""
    if config.network.kind == "resnet":
        from muzero.resnet import ResNetwork

        return ResNetwork(config, observation_shape, np.uint8 if config.game.atari is not None else np.float32)
    return MLPNetwork(config, int(np.prod(observation_shape)))
