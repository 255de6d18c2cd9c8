"""What the Keras network families share: three Keras models (representation h, dynamics g,
prediction f), the min-max scaling of the hidden state, the support, the step count.

The families: `MLPNetwork` (`mlp.py`, vector observations) and `ResNetwork`
(`resnet.py`, images); `muzero.networks.make_network` picks one.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from muzero.networks.base import MIN_MAX_EPSILON, Network, NetworkOutput
from muzero.support import support_to_scalar_tf


def scale_hidden_state(state: tf.Tensor) -> tf.Tensor:
    """Min-max scaling of each row to [0, 1] (paper appendix); [B, H] -> [B, H]."""
    low = tf.reduce_min(state, axis=-1, keepdims=True)
    high = tf.reduce_max(state, axis=-1, keepdims=True)
    return (state - low) / tf.maximum(high - low, MIN_MAX_EPSILON)


class KerasNetwork(Network):
    """What the Keras network families share: three Keras models, the support, the step count."""

    representation: keras.Model
    dynamics: keras.Model
    prediction: keras.Model
    support_size: int
    value_transform: bool = True  # h(x) before the support (`network.value_transform`)
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

    def represent(self, observation, training: bool = False) -> tf.Tensor:
        """The representation function h alone, scaled as `initial_inference`'s hidden state."""
        raise NotImplementedError

    def _scalar(self, logits: tf.Tensor) -> tf.Tensor:
        if self.support_size == 0:
            return logits[:, 0]
        return support_to_scalar_tf(logits, self.support_size, self.value_transform)

    def _predict(
        self, hidden_state: tf.Tensor, reward: tf.Tensor, reward_logits: tf.Tensor | None, training: bool = False
    ) -> NetworkOutput:
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
