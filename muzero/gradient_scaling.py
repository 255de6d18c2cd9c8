"""`scale_gradient`: identity in the forward pass, gradient times `scale` in the backward pass.

The pseudocode calls `tf.scale_gradient`, which TensorFlow never had; its author
gave the definition below (Sonnet 1 had the same function as `snt.scale_gradient`).
Two implementations live here and are tested equal:

* `scale_gradient`: the pseudocode's one-liner with `tf.stop_gradient`.
* `scale_gradient_custom`: the same through `@tf.custom_gradient`, which states the
  backward pass directly: upstream gradient times `scale`.

Neither is a norm clip (`clipnorm`, `tf.clip_by_norm`, `MaxNorm`): the gradient keeps
its direction and its size relative to other gradients, whatever its norm.
"""

from __future__ import annotations

import tensorflow as tf


# Why: MuZero wants part of the loss to reach some weights with a smaller weight
# than the rest, without changing what the forward pass computes. The forward
# value is `tensor` (t * s + t * (1 - s) = t); in the backward pass only the first
# term carries gradient, so the incoming gradient is multiplied by `scale`.
def scale_gradient(tensor: tf.Tensor, scale: float) -> tf.Tensor:
    """Scales the gradient for the backward pass; identity forward. Any shape and float dtype."""
    return tensor * scale + tf.stop_gradient(tensor) * (1 - scale)


def scale_gradient_custom(tensor: tf.Tensor, scale: float) -> tf.Tensor:
    """`scale_gradient` written with `tf.custom_gradient`: backward = upstream * scale."""

    @tf.custom_gradient
    def _scaled_identity(x):
        def grad(upstream):
            return upstream * tf.cast(scale, upstream.dtype)

        return tf.identity(x), grad

    return _scaled_identity(tensor)
