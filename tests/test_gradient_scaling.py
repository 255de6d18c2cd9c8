"""Tests for muzero/gradient_scaling.py: both implementations, every way they are run."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from muzero.gradient_scaling import scale_gradient, scale_gradient_custom

IMPLEMENTATIONS = [scale_gradient, scale_gradient_custom]
SHAPES = [(), (7,), (3, 4), (2, 3, 5)]
DTYPES = [tf.float32, tf.float16, tf.bfloat16]
MODES = ["eager", "function", "xla"]


def _value_and_grad(fn, x, upstream, scale, mode):
    """Forward value of fn(x, scale) and d/dx of sum(fn(x, scale) * upstream)."""

    def run(x, upstream):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x, scale)
            loss = tf.reduce_sum(y * upstream)  # so that d loss / d y = upstream
        return y, tape.gradient(loss, x)

    if mode == "function":
        run = tf.function(run)
    elif mode == "xla":
        run = tf.function(run, jit_compile=True)
    return run(x, upstream)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("fn", IMPLEMENTATIONS, ids=lambda f: f.__name__)
def test_forward_identity_backward_times_scale(fn, dtype, mode):
    rng = np.random.default_rng(0)
    for shape in SHAPES:
        # Values exactly representable in 16 bits (multiples of 1/4 in [-8, 8]) and
        # scales that are powers of two or 0/1, so "exactly" is exact in every dtype.
        x = tf.constant(rng.integers(-32, 33, size=shape) / 4, dtype)
        upstream = tf.constant(rng.integers(-32, 33, size=shape) / 4, dtype)
        for scale in (0.0, 0.25, 0.5, 1.0):
            y, grad = _value_and_grad(fn, x, upstream, scale, mode)
            assert y.dtype == dtype and grad.dtype == dtype
            np.testing.assert_array_equal(y.numpy().astype(np.float64), x.numpy().astype(np.float64))
            # d/dx = upstream * scale, exactly.
            np.testing.assert_array_equal(grad.numpy().astype(np.float64), upstream.numpy().astype(np.float64) * scale)


@pytest.mark.parametrize("fn", IMPLEMENTATIONS, ids=lambda f: f.__name__)
def test_non_power_of_two_scale_float32(fn):
    x = tf.constant([[1.0, -2.0], [3.5, 0.1]])
    upstream = tf.constant([[0.3, 1.7], [-2.0, 10.0]])
    _, grad = _value_and_grad(fn, x, upstream, 0.2, "eager")
    # upstream * 0.2 = [[0.06, 0.34], [-0.4, 2.0]] (to float32 rounding).
    np.testing.assert_allclose(grad.numpy(), [[0.06, 0.34], [-0.4, 2.0]], rtol=1e-6)


@pytest.mark.parametrize("fn", IMPLEMENTATIONS, ids=lambda f: f.__name__)
def test_scale_zero_is_stop_gradient_and_one_is_identity(fn):
    x = tf.constant([1.0, 2.0, 3.0])
    upstream = tf.constant([4.0, -5.0, 6.0])
    _, zero = _value_and_grad(fn, x, upstream, 0.0, "eager")
    _, stopped = _value_and_grad(lambda t, _: tf.stop_gradient(t), x, upstream, 0.0, "eager")
    _, one = _value_and_grad(fn, x, upstream, 1.0, "eager")
    _, identity = _value_and_grad(lambda t, _: tf.identity(t), x, upstream, 1.0, "eager")
    # stop_gradient gives None (no path); that is the zero gradient.
    assert stopped is None
    np.testing.assert_array_equal(zero.numpy(), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(one.numpy(), identity.numpy())


def test_the_two_implementations_agree_inside_a_network():
    rng = np.random.default_rng(1)
    dense = keras.layers.Dense(4)
    x = tf.constant(rng.normal(size=(5, 3)), tf.float32)
    grads = []
    for fn in IMPLEMENTATIONS:
        with tf.GradientTape() as tape:
            h = fn(tf.tanh(dense(x)), 0.5)
            loss = tf.reduce_sum(tf.square(dense.kernel)) + tf.reduce_sum(h**2)
        grads.append(tape.gradient(loss, dense.trainable_variables))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


def test_scaling_is_not_norm_clipping():
    # A large-norm gradient: upstream = [300, 400] (norm 500) flowing into x.
    x = tf.constant([1.0, 1.0])
    upstream = tf.constant([300.0, 400.0])
    _, scaled = _value_and_grad(scale_gradient, x, upstream, 0.5, "eager")
    # scale_gradient(., 0.5): [150, 200], norm 250: same direction, half the size.
    np.testing.assert_allclose(scaled.numpy(), [150.0, 200.0])
    # tf.clip_by_norm(g, 0.5): [300, 400] * 0.5 / 500 = [0.3, 0.4], norm 0.5.
    np.testing.assert_allclose(tf.clip_by_norm(upstream, 0.5).numpy(), [0.3, 0.4], rtol=1e-6)
    # keras.constraints.MaxNorm(0.5) acts on weights, not gradients: it rescales the
    # *weight* vector [300, 400] to norm 0.5 as well: [0.3, 0.4].
    np.testing.assert_allclose(keras.constraints.MaxNorm(0.5, axis=0)(upstream).numpy(), [0.3, 0.4], rtol=1e-5)
    # A small gradient is left alone by clipping but still halved by scaling.
    small = tf.constant([0.03, 0.04])
    _, scaled_small = _value_and_grad(scale_gradient, x, small, 0.5, "eager")
    np.testing.assert_allclose(scaled_small.numpy(), [0.015, 0.02])
    np.testing.assert_allclose(tf.clip_by_norm(small, 0.5).numpy(), [0.03, 0.04])
