"""Value and reward transform and categorical support (paper appendix, "Network Training").

Values and rewards are squashed by h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x, then
written as a "two-hot" distribution over the integers -n..n: the two neighbouring
integers share the probability mass in proportion to closeness. The network predicts
logits over those 2n + 1 bins; the scalar back is h^-1 of the distribution's mean.

With `network.value_transform: false` the support holds the scalars as they are (no h):
board games' values and rewards in -1..1 on 3 bins become win / draw / loss classes.

Numpy versions serve self-play and target building; `support_to_scalar_tf` serves the
TensorFlow network. They compute the same formulas (tests check both).
"""

from __future__ import annotations

import numpy as np

EPSILON = 0.001


def num_bins(support_size: int) -> int:
    """Outputs of a value or reward head: 2n + 1 logits over -n..n, or 1 scalar when n = 0."""
    return 2 * support_size + 1 if support_size else 1


def h(x: np.ndarray) -> np.ndarray:
    """h(x) = sign(x) * (sqrt(|x| + 1) - 1) + eps * x, elementwise."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * (np.sqrt(np.abs(x) + 1.0) - 1.0) + EPSILON * x


def h_inverse(y: np.ndarray) -> np.ndarray:
    """Closed-form inverse of `h` (Pohlen et al. 2018, Proposition A.2)."""
    y = np.asarray(y, dtype=np.float64)
    root = (np.sqrt(1.0 + 4.0 * EPSILON * (np.abs(y) + 1.0 + EPSILON)) - 1.0) / (2.0 * EPSILON)
    return np.sign(y) * (root**2 - 1.0)


def scalar_to_support(x: np.ndarray, support_size: int, transform: bool = True) -> np.ndarray:
    """Two-hot encoding of h(x) over the integers -support_size..support_size.

    Args:
      x: scalars, any shape S.
      support_size: n; values of h(x) outside [-n, n] are clipped.
      transform: false: encode x itself, not h(x).

    Returns:
      float32 array of shape S + [2n + 1], each row summing to 1.
    """
    y = np.clip(h(x) if transform else np.asarray(x, np.float64), -support_size, support_size)
    floor = np.floor(y)
    upper_weight = y - floor
    lower_index = (floor + support_size).astype(np.int64)
    upper_index = np.minimum(lower_index + 1, 2 * support_size)
    out = np.zeros(y.shape + (2 * support_size + 1,), dtype=np.float32)
    np.put_along_axis(out, lower_index[..., None], (1.0 - upper_weight)[..., None], axis=-1)
    # Add, not put: when y is exactly n, lower and upper coincide.
    upper = np.take_along_axis(out, upper_index[..., None], axis=-1) + upper_weight[..., None]
    np.put_along_axis(out, upper_index[..., None], upper, axis=-1)
    return out


def support_to_scalar(probabilities: np.ndarray, support_size: int, transform: bool = True) -> np.ndarray:
    """h^-1 of the mean of a distribution over -n..n (the mean itself when not `transform`);
    shape [..., 2n + 1] -> [...]."""
    bins = np.arange(-support_size, support_size + 1, dtype=np.float64)
    mean = np.sum(np.asarray(probabilities, np.float64) * bins, axis=-1)
    return h_inverse(mean) if transform else mean


def support_to_scalar_tf(logits, support_size: int, transform: bool = True):
    """TensorFlow twin of `support_to_scalar` that takes logits: [..., 2n + 1] -> [...]."""
    import tensorflow as tf

    probabilities = tf.nn.softmax(logits, axis=-1)
    bins = tf.range(-support_size, support_size + 1, dtype=probabilities.dtype)
    y = tf.reduce_sum(probabilities * bins, axis=-1)
    if not transform:
        return y
    root = (tf.sqrt(1.0 + 4.0 * EPSILON * (tf.abs(y) + 1.0 + EPSILON)) - 1.0) / (2.0 * EPSILON)
    return tf.sign(y) * (tf.square(root) - 1.0)


def entropy_tf(distribution):
    """Entropy in nats of distributions [..., n] -> [...] (0 log 0 = 0): the floor under a
    cross-entropy against them."""
    import tensorflow as tf

    return -tf.reduce_sum(tf.math.xlogy(distribution, distribution), axis=-1)
