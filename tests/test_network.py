"""Tests for muzero/network.py and muzero/models.py."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from muzero.config import MuZeroConfig, NetworkConfig
from muzero.networks.base import make_uniform_network
from muzero.networks.keras import scale_hidden_state
from muzero.networks.mlp import MLPNetwork
from muzero.networks.numpy_mlp import scale_hidden_state_np


def _perturbed_network(config: MuZeroConfig, seed: int = 0) -> MLPNetwork:
    network = MLPNetwork(config.network, config.action_space_size, observation_size=4)
    rng = np.random.default_rng(seed)
    for variable in network.trainable_variables:  # non-zero biases too
        variable.assign(rng.normal(size=variable.shape).astype(np.float32) * 0.5)
    return network


def test_min_max_scaling_by_hand():
    state = np.array([[1.0, 3.0, 2.0], [-4.0, 0.0, 4.0], [5.0, 5.0, 5.0]], np.float32)
    # Row 1: (x - 1) / (3 - 1) = [0, 1, 0.5]; row 2: (x + 4) / 8 = [0, 0.5, 1];
    # row 3: all equal: (x - 5) / max(0, 1e-5) = 0.
    expected = [[0.0, 1.0, 0.5], [0.0, 0.5, 1.0], [0.0, 0.0, 0.0]]
    np.testing.assert_allclose(scale_hidden_state_np(state), expected)
    np.testing.assert_allclose(scale_hidden_state(tf.constant(state)).numpy(), expected)


@pytest.mark.parametrize(
    "support_size, activation, transform", [(3, "elu", True), (0, "relu", True), (10, "tanh", True), (1, "elu", False)]
)
def test_numpy_mirror_equals_keras(support_size, activation, transform):
    config = MuZeroConfig(
        network=NetworkConfig(
            hidden_state_size=6,
            hidden_layers=(16, 8),
            activation=activation,
            support_size=support_size,
            value_transform=transform,
        )
    )
    network = _perturbed_network(config)
    mirror = network.published_network()
    rng = np.random.default_rng(1)
    observation = rng.normal(size=(9, 4)).astype(np.float32)
    action = rng.integers(2, size=9)
    keras_out, numpy_out = network.initial_inference(observation), mirror.initial_inference(observation)
    keras_next = network.recurrent_inference(keras_out.hidden_state, action)
    numpy_next = mirror.recurrent_inference(numpy_out.hidden_state, action)
    for keras_o, numpy_o in ((keras_out, numpy_out), (keras_next, numpy_next)):
        for name in ("value", "reward", "policy_logits", "hidden_state"):
            np.testing.assert_allclose(
                np.asarray(getattr(keras_o, name)), getattr(numpy_o, name), rtol=1e-4, atol=1e-4, err_msg=name
            )
    hidden = numpy_next.hidden_state
    # Each row spans exactly [0, 1] after min-max scaling.
    np.testing.assert_allclose(hidden.min(axis=1), 0.0, atol=1e-6)
    np.testing.assert_allclose(hidden.max(axis=1), 1.0, atol=1e-6)
    assert numpy_out.reward.tolist() == [0.0] * 9  # no reward at the root


def test_weights_round_trip():
    config = MuZeroConfig(network=NetworkConfig(hidden_state_size=4, hidden_layers=(8,)))
    source, target = _perturbed_network(config, seed=0), _perturbed_network(config, seed=1)
    target.set_weights(source.get_weights())
    for a, b in zip(source.trainable_variables, target.trainable_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_uniform_network():
    network = make_uniform_network(action_space_size=3)
    out = network.initial_inference(np.zeros((2, 4)))
    # Uniform policy (equal logits), value 0, reward 0.
    assert out.policy_logits.shape == (2, 3) and not out.policy_logits.any()
    assert out.value.tolist() == [0.0, 0.0] and out.reward.tolist() == [0.0, 0.0]
    assert network.recurrent_inference(out.hidden_state, np.array([0, 2])).value.tolist() == [0.0, 0.0]
    assert network.training_steps() == 0


@pytest.mark.parametrize("value_prefix", [False, True])
def test_init_zero_heads_start_at_value_0_reward_0_and_a_uniform_prior(value_prefix):
    # network.init_zero: the reward, value and policy heads' output layers start at zero, so each of
    # their logits is 0: the policy softmax is 1/3 on each of 3 actions, and the value and reward
    # supports over -5..5 are uniform, whose mean is 0, and h^-1(0) = 0. (With value prefix the reward
    # is the prefix, 0, minus the parent's, 0.) The hidden state keeps Keras's default: each sample
    # min-max scaled, 0 and 1 at its extremes.
    net = NetworkConfig(
        hidden_state_size=8, hidden_layers=(16,), support_size=5, init_zero=True, value_prefix=value_prefix
    )
    network = MLPNetwork(net, action_space_size=3, observation_size=4)
    observations = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    for copy in (network, network.published_network()):  # the learner's and self-play's numpy copy
        output = copy.initial_inference(observations)
        recurrent = copy.recurrent_inference(output.hidden_state, np.array([0, 1, 2, 0, 1]))
        for out in (output, recurrent):
            assert not np.asarray(out.policy_logits).any()
            np.testing.assert_allclose(out.value, 0.0, atol=1e-4)  # float32's rounding in TensorFlow's h^-1
            assert np.asarray(out.hidden_state)[:, :8].max(axis=1).tolist() == [1.0] * 5
        np.testing.assert_allclose(recurrent.reward, 0.0, atol=1e-4)
    # Training moves the zero layers: the value's cross-entropy gradient on its output kernel is
    # hidden^T (softmax - target), and softmax (1/11 each) differs from a one-hot target.
    state = tf.constant(np.asarray(output.hidden_state)[:, :8])
    with tf.GradientTape() as tape:
        logits = network.prediction(state)["value"]
        loss = tf.nn.softmax_cross_entropy_with_logits(tf.one_hot([7] * 5, 11), logits)
    assert np.abs(tape.gradient(loss, network.prediction.get_layer("value").kernel).numpy()).sum() > 0
    # Keras's default (the option off): logits not all 0.
    default = MLPNetwork(NetworkConfig(hidden_state_size=8, hidden_layers=(16,), support_size=5), 3, 4)
    assert np.asarray(default.initial_inference(observations).policy_logits).any()
