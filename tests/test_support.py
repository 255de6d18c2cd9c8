"""Tests for muzero/support.py: the h transform and the categorical support."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from muzero.support import entropy_tf, h, h_inverse, scalar_to_support, support_to_scalar, support_to_scalar_tf


def test_h_by_hand():
    # h(x) = sign(x) (sqrt(|x| + 1) - 1) + 0.001 x
    # h(0) = 0; h(3) = 2 - 1 + 0.003 = 1.003; h(-3) = -1.003; h(8) = 3 - 1 + 0.008 = 2.008
    np.testing.assert_allclose(h(np.array([0.0, 3.0, -3.0, 8.0])), [0.0, 1.003, -1.003, 2.008])


def test_h_inverse_inverts_h():
    x = np.concatenate([np.linspace(-1e4, 1e4, 2001), [0.0, 1e-6, -0.5, 300.0]])
    np.testing.assert_allclose(h_inverse(h(x)), x, rtol=1e-9, atol=1e-9)


def test_two_hot_by_hand():
    support = scalar_to_support(np.array([3.0, -3.0, 0.0]), 10)
    # h(3) = 1.003: bins -10..10, so integer 1 is index 11 with 0.997 and index 12 gets 0.003.
    expected = np.zeros((3, 21))
    expected[0, 11], expected[0, 12] = 0.997, 0.003
    # h(-3) = -1.003: floor -2 (index 8) gets 0.003, -1 (index 9) gets 0.997.
    expected[1, 8], expected[1, 9] = 0.003, 0.997
    expected[2, 10] = 1.0  # h(0) = 0
    np.testing.assert_allclose(support, expected, atol=1e-6)


def test_round_trip_and_clipping():
    x = np.array([0.0, 1.0, -1.0, 3.0, 57.5, -100.0])
    np.testing.assert_allclose(support_to_scalar(scalar_to_support(x, 10), 10), x, rtol=1e-5, atol=1e-5)
    # h(1e6) = 999 + 1000 = ~1999 > 10: all mass on the top bin, and the scalar back is h^-1(10).
    top = scalar_to_support(np.array([1e6, h_inverse(10.0)]), 10)
    np.testing.assert_allclose(top[:, -1], [1.0, 1.0], atol=1e-6)
    assert support_to_scalar(top[0], 10) == pytest.approx(h_inverse(10.0))


def test_tf_twin_matches_numpy():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(5, 21)) * 3
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(
        support_to_scalar_tf(tf.constant(logits), 10).numpy(), support_to_scalar(probabilities, 10), rtol=1e-9
    )


def test_paper_support_of_601_bins():
    # Atari: integers -300..300. h(0) = 0 -> all mass on bin 300 (the middle).
    # h(1) = sqrt(2) - 1 + 0.001 = 0.415214: bins 300 and 301 get 0.584786 and 0.415214.
    # h(300) = sqrt(301) - 1 + 0.3 = 16.649352: bins 316 and 317 get 0.350648 and 0.649352.
    support = scalar_to_support(np.array([0.0, 1.0, -1.0, 300.0, -300.0]), 300)
    assert support.shape == (5, 601)
    assert support[0, 300] == pytest.approx(1.0)
    assert support[1, 300] == pytest.approx(0.584786, abs=1e-6) and support[1, 301] == pytest.approx(0.415214, abs=1e-6)
    # h(-1) = -0.415214: floor -1 (bin 299) gets 0.415214, 0 (bin 300) gets 0.584786.
    assert support[2, 299] == pytest.approx(0.415214, abs=1e-6) and support[2, 300] == pytest.approx(0.584786, abs=1e-6)
    assert support[3, 316] == pytest.approx(0.350648, abs=1e-6) and support[3, 317] == pytest.approx(0.649352, abs=1e-6)
    assert support[4, 283] == pytest.approx(0.649352, abs=1e-6) and support[4, 284] == pytest.approx(0.350648, abs=1e-6)
    x = np.array([0.0, 1.0, -1.0, 300.0, -300.0, 12_345.6])
    np.testing.assert_allclose(support_to_scalar(scalar_to_support(x, 300), 300), x, rtol=1e-6, atol=1e-6)
    # Beyond the support: h(x) = 300 at x = h^-1(300) = 58,705.6 (sqrt(x) - 1 + 0.001 x = 242.3 - 1 + 58.7);
    # larger values clip to it.
    beyond = scalar_to_support(np.array([1e6, -1e6]), 300)
    assert beyond[0, -1] == pytest.approx(1.0) and beyond[1, 0] == pytest.approx(1.0)
    assert support_to_scalar(beyond[0], 300) == pytest.approx(h_inverse(300.0))
    assert h_inverse(300.0) == pytest.approx(58_705.58, abs=0.01)


def test_without_the_transform_board_values_are_win_draw_loss_classes():
    # network.value_transform: false, 3 bins over -1..1: +1, 0, -1 are one-hot on bins 1, 0,
    # -1 (indices 2, 1, 0); 0.5 splits half and half between 0 and 1.
    support = scalar_to_support(np.array([1.0, 0.0, -1.0, 0.5]), 1, transform=False)
    np.testing.assert_allclose(support, [[0, 0, 1], [0, 1, 0], [1, 0, 0], [0, 0.5, 0.5]], atol=1e-7)
    # With h, +1 becomes h(1) = sqrt(2) - 1 + 0.001 = 0.41521: only that much on the top bin.
    np.testing.assert_allclose(scalar_to_support(np.array([1.0]), 1)[0], [0, 0.58479, 0.41521], atol=1e-5)
    # Back: the mean of the bins itself, (0.2 * -1 + 0.7 * 1) = 0.5, in numpy and TensorFlow.
    probabilities = np.array([0.2, 0.1, 0.7])
    assert support_to_scalar(probabilities, 1, transform=False) == pytest.approx(0.5)
    logits = tf.math.log(tf.constant([probabilities]))
    assert float(support_to_scalar_tf(logits, 1, transform=False)[0]) == pytest.approx(0.5, rel=1e-6)


def test_entropy_by_hand():
    # (0.7, 0.3): -(0.7 ln 0.7 + 0.3 ln 0.3) = 0.610864; a one-hot target has none (0 ln 0 = 0);
    # uniform over 3: ln 3.
    got = entropy_tf(np.array([[0.0, 0.7, 0.3], [0.0, 1.0, 0.0], [1 / 3, 1 / 3, 1 / 3]]))
    np.testing.assert_allclose(got.numpy(), [0.610864302, 0.0, np.log(3)], rtol=1e-8)
