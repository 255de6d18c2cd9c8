"""`consistency_loss`: an EfficientZero-style self-supervised loss on the model's hidden states.

Not MuZero, off by default (`train.consistency_loss_weight`); `muzero.training.muzero_loss`
adds it to each unroll step's loss when on.
"""

from __future__ import annotations

import tensorflow as tf


# Why (EfficientZero, Ye et al. 2021; not MuZero): the model's hidden states are trained
# only by the value, reward and policy they predict, which in a board game say little
# until a line is nearly complete. Asking the state the dynamics reach after k real
# actions to point the same way as the representation of the real observation there
# (the target gets no gradient) gives every unroll step a dense signal about the game
# itself. EfficientZero-style, not EfficientZero's: it compares projections, with a
# prediction head on the dynamics side (SimSiam's asymmetry). Here the two hidden states
# are compared directly, each centred on its own mean first: min-max scaled states have
# no negative elements, so any two of them are already close in plain cosine (the loss
# stayed near 0.03 in a tic-tac-toe run, docs/boardgames/consistency_uncentred/); centred, it is
# their correlation. The value, reward and policy losses keep them from collapsing.
# With `network.projection_size` > 0 the heads are EfficientZero's (`KerasNetwork._enable_projection`)
# and the cosine is its plain one, of the projections (batch norm centres them already).
def consistency_loss(predicted: tf.Tensor, target: tf.Tensor, mask: tf.Tensor, centred: bool = True) -> tf.Tensor:
    """Per-sample 1 - cosine similarity of the (centred) states.

    Args:
      predicted: [B, ...] hidden state from the dynamics function (or its projection through the
        prediction head).
      target: [B, ...] representation of the real observation, or its projection (gradient
        stopped here).
      mask: [B] 1 where the real observation exists (inside the game), else 0.
      centred: whether each sample is centred on the mean of its elements first.

    Returns:
      [B] in [0, 2]: (1 - cos(predicted - mean(predicted), target - mean(target))) * mask, the
      means over each sample's elements (none when not `centred`).
    """

    def unit(x: tf.Tensor) -> tf.Tensor:
        x = tf.reshape(tf.cast(x, tf.float32), [tf.shape(x)[0], -1])
        return tf.math.l2_normalize(x - tf.reduce_mean(x, axis=-1, keepdims=True) if centred else x, axis=-1)

    similarity = tf.reduce_sum(unit(predicted) * unit(tf.stop_gradient(target)), axis=-1)
    return (1.0 - similarity) * mask
