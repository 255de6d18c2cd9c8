"""What the Keras network families share: three Keras models (representation h, dynamics g,
prediction f), the min-max scaling of the hidden state, the support, the step count, and
EfficientZero's value prefix (`network.value_prefix`).

The families: `MLPNetwork` (`mlp.py`, vector observations) and `ResNetwork`
(`resnet.py`, images); `muzero.networks.make_network` picks one.

Value prefix (Ye et al. 2021, section 4.2; docs/value_prefix.md): the dynamics' reward head
becomes an LSTM cell (`lstm_cell`, u = `network.lstm_hidden_size` units) whose output predicts
the sum of rewards since the last reset. The searches see the network only through
`initial_inference` / `recurrent_inference` and keep hidden states as opaque arrays, so the
hidden state they carry is *augmented* (`ValuePrefixState`): the latent state s, then the
LSTM's (h, c), the node's predicted prefix and its steps since the last reset modulo the
horizon. `recurrent_inference` restarts the LSTM from zeros, and the parent's prefix from 0,
when that count is 0 (at the root and every `network.value_prefix_horizon` steps), and returns
reward = prefix - parent's prefix. Only s is min-max scaled, and only s enters the dynamics and
prediction functions.
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


def lstm_cell(features, lstm_state, units: int):
    """An LSTM cell as Keras layers: one Dense "lstm" over [features, h] gives the gates i, f, g, o
    (in that order); c' = sigmoid(f) c + sigmoid(i) tanh(g), h' = sigmoid(o) tanh(c'), in float32.

    Args:
      features: [B, F] the cell's input.
      lstm_state: [B, 2u] h then c.
      units: u.

    Returns:
      (h' [B, u], [h', c'] as [B, 2u]).
    """
    h, c = keras.ops.split(keras.ops.cast(lstm_state, "float32"), 2, axis=-1)
    inputs = keras.ops.concatenate([keras.ops.cast(features, "float32"), h], axis=-1)
    gates = keras.layers.Dense(4 * units, name="lstm", dtype="float32")(inputs)
    i, f, g, o = keras.ops.split(gates, 4, axis=-1)
    c = keras.ops.sigmoid(f) * c + keras.ops.sigmoid(i) * keras.ops.tanh(g)
    h = keras.ops.sigmoid(o) * keras.ops.tanh(c)
    return h, keras.ops.concatenate([h, c], axis=-1)


class ValuePrefixState:
    """The augmented hidden state of a value-prefix network, for a latent state of `latent_shape`.

    Vector latents ([B, H], the MLP): [B, H + 2u + 2] = [s, h, c, prefix, count].
    Plane latents ([B, rows, cols, P], the resnet): [B, rows, cols, P + m], the 2u + 2 numbers
    [h, c, prefix, count] zero-padded to m = ceil((2u + 2) / (rows * cols)) planes of rows x cols
    (row-major reshape).

    Args:
      latent_shape: one latent state's shape, (H,) or (rows, cols, P).
      units: u, the LSTM's units.
    """

    def __init__(self, latent_shape: tuple[int, ...], units: int):
        self.latent_shape, self.units = tuple(latent_shape), units
        self.size = 2 * units + 2  # h, c, prefix, count
        if len(self.latent_shape) == 1:
            self.shape = (self.latent_shape[0] + self.size,)
        else:
            rows, cols, planes = self.latent_shape
            self.planes = -(-self.size // (rows * cols))
            self.shape = (rows, cols, planes + self.planes)

    def pack(self, latent: tf.Tensor, lstm_state: tf.Tensor, prefix: tf.Tensor, count: tf.Tensor) -> tf.Tensor:
        """[B, *latent_shape], [B, 2u], [B], [B] -> [B, *shape] (float32)."""
        extra = tf.concat([tf.cast(lstm_state, tf.float32), prefix[:, None], count[:, None]], axis=-1)
        if len(self.latent_shape) > 1:
            rows, cols, _ = self.latent_shape
            extra = tf.pad(extra, [[0, 0], [0, self.planes * rows * cols - self.size]])
            extra = tf.reshape(extra, [-1, rows, cols, self.planes])
        return tf.concat([tf.cast(latent, tf.float32), extra], axis=-1)

    def unpack(self, state: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        """[B, *shape] -> (latent [B, *latent_shape], lstm_state [B, 2u], prefix [B], count [B])."""
        state = tf.convert_to_tensor(state, tf.float32)
        latent, extra = state[..., : self.latent_shape[-1]], state[..., self.latent_shape[-1] :]
        extra = tf.reshape(extra, [tf.shape(state)[0], -1])[:, : self.size]
        return latent, extra[:, : 2 * self.units], extra[:, -2], extra[:, -1]


class KerasNetwork(Network):
    """What the Keras network families share: three Keras models, the support, the step count."""

    representation: keras.Model
    dynamics: keras.Model
    prediction: keras.Model
    support_size: int
    value_transform: bool = True  # h(x) before the support (`network.value_transform`)
    steps: int
    # Value prefix: the augmented state's layout (None: off, the hidden state is the latent state)
    # and the horizon; `hidden_shape` is what the searches carry, `latent_shape` the latent part.
    prefix_state: ValuePrefixState | None = None
    value_prefix_horizon: int = 0
    latent_shape: tuple[int, ...]
    hidden_shape: tuple[int, ...]
    # EfficientZero's SimSiam heads for the consistency loss (`network.projection_size`); None: off.
    projection: keras.Model | None = None
    projection_head: keras.Model | None = None

    def _enable_projection(self, size: int) -> None:
        """Builds EfficientZero's heads for P = `size` (its Atari: 1,024), after `latent_shape` is set:
        `projection`, [B, *latent_shape] -> [B, P], three dense layers of P units, batch norm after
        each and ReLU after the first two; `projection_head`, [B, P] -> [B, P], a dense layer of P / 2
        units with batch norm and ReLU, then one of P (EfficientZero's 512 and 1,024)."""
        inputs = keras.Input(self.latent_shape)
        x = keras.layers.Flatten()(inputs)
        for i in range(3):
            x = keras.layers.Dense(size, name=f"projection_{i}")(x)
            x = keras.layers.BatchNormalization(name=f"projection_norm_{i}")(x)
            x = keras.layers.ReLU()(x) if i < 2 else x
        self.projection = keras.Model(inputs, x, name="projection")
        head = keras.Input((size,))
        y = keras.layers.Dense(max(1, size // 2), name="head_0")(head)
        y = keras.layers.ReLU()(keras.layers.BatchNormalization(name="head_norm_0")(y))
        self.projection_head = keras.Model(head, keras.layers.Dense(size, name="head_1")(y), name="projection_head")

    def _enable_value_prefix(self, units: int, horizon: int) -> None:
        """Turns the augmented state on (after `latent_shape` is set)."""
        self.prefix_state = ValuePrefixState(self.latent_shape, units)
        self.value_prefix_horizon = horizon
        self.hidden_shape = self.prefix_state.shape

    def latent(self, hidden_state: tf.Tensor) -> tf.Tensor:
        """The latent part s of a (possibly augmented) hidden state: [B, *hidden_shape] -> [B, *latent_shape]."""
        return hidden_state if self.prefix_state is None else self.prefix_state.unpack(hidden_state)[0]

    def map_latent(self, hidden_state: tf.Tensor, fn) -> tf.Tensor:
        """`fn` applied to the latent part only (the LSTM state, prefix and count pass unchanged)."""
        if self.prefix_state is None:
            return fn(hidden_state)
        latent, lstm_state, prefix, count = self.prefix_state.unpack(hidden_state)
        return self.prefix_state.pack(fn(latent), lstm_state, prefix, count)

    def _initial_state(self, latent: tf.Tensor) -> tf.Tensor:
        """The root's hidden state: the latent state, augmented with zeros (LSTM, prefix, count)."""
        if self.prefix_state is None:
            return latent
        batch = tf.shape(latent)[0]
        zeros = tf.zeros([batch])
        return self.prefix_state.pack(latent, tf.zeros([batch, 2 * self.prefix_state.units]), zeros, zeros)

    def _dynamics_inputs(self, hidden_state: tf.Tensor):
        """(latent, LSTM state [B, 2u] or None, parent's prefix [B] or None, next count [B] or None):
        the LSTM state and the parent's prefix are zeros where the parent's count is 0 (a reset)."""
        if self.prefix_state is None:
            return hidden_state, None, None, None
        latent, lstm_state, prefix, count = self.prefix_state.unpack(hidden_state)
        count = tf.round(count)
        keep = tf.cast(tf.not_equal(count, 0.0), tf.float32)
        next_count = tf.math.floormod(count + 1.0, float(self.value_prefix_horizon))
        return latent, lstm_state * keep[:, None], prefix * keep, next_count

    def _recurrent_output(
        self, out: dict, hidden_state_inputs: tuple, latent: tf.Tensor, training: bool
    ) -> NetworkOutput:
        """The NetworkOutput of one dynamics step: `out` the dynamics' outputs, `latent` its new
        scaled latent state. With value prefix, reward = prefix - parent's prefix, and reward_logits
        are the prefix's (what training fits to the prefix targets)."""
        reward_logits = out["reward"] if self.support_size else out["reward"][:, 0]
        reward = self._scalar(out["reward"])
        if self.prefix_state is None:
            return self._predict(latent, reward, reward_logits, training)
        _, _, parent_prefix, next_count = hidden_state_inputs
        hidden_state = self.prefix_state.pack(latent, out["lstm_state"], reward, next_count)
        return self._predict(latent, reward - parent_prefix, reward_logits, training, hidden_state)

    @property
    def models(self) -> dict[str, keras.Model]:
        models = {"representation": self.representation, "dynamics": self.dynamics, "prediction": self.prediction}
        if self.projection is not None:  # trained, checkpointed and published with the rest
            models.update(projection=self.projection, projection_head=self.projection_head)
        return models

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
        self,
        latent: tf.Tensor,
        reward: tf.Tensor,
        reward_logits: tf.Tensor | None,
        training: bool = False,
        hidden_state: tf.Tensor | None = None,
    ) -> NetworkOutput:
        """prediction(latent) with the reward of the transition into it; the output's hidden
        state is `hidden_state` (the augmented one) when given, else the latent state. The
        prediction reads the latent part of `hidden_state` itself, so that the losses depend on
        the hidden state the output returns (the gradient norms per unroll step need it)."""
        if hidden_state is not None:
            latent = self.latent(hidden_state)
        out = self.prediction(latent, training=training)
        return NetworkOutput(
            value=self._scalar(out["value"]),
            reward=reward,
            policy_logits=out["policy"],
            hidden_state=latent if hidden_state is None else hidden_state,
            value_logits=out["value"] if self.support_size else out["value"][:, 0],
            reward_logits=reward_logits,
        )

    def training_steps(self) -> int:
        return self.steps
