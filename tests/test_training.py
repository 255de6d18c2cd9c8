"""Tests for muzero/training.py: scale_gradient, the lr schedule, update_weights' factors."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from muzero.config import GameConfig, MuZeroConfig, NetworkConfig, TrainConfig
from muzero.config_io import ConfigError
from muzero.config_loader import load_config
from muzero.consistency import consistency_loss
from muzero.gradient_scaling import scale_gradient
from muzero.networks.mlp import MLPNetwork
from muzero.networks.resnet import ResNetwork
from muzero.replay import Batch
from muzero.training import Learner, learning_rate, make_optimizer, muzero_loss


class TestScaleGradient:
    @pytest.mark.parametrize("scale", [0.0, 0.25, 0.5, 1.0])
    def test_forward_unchanged_backward_scaled(self, scale):
        x = tf.constant([[1.5, -2.0, 3.0], [0.0, 4.0, -1.0]])
        upstream = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = scale_gradient(x, scale)
            loss = tf.reduce_sum(y * upstream)  # d loss / d y = upstream
        np.testing.assert_array_equal(y.numpy(), x.numpy())
        # d loss / d x = scale * upstream, exactly.
        np.testing.assert_allclose(tape.gradient(loss, x).numpy(), scale * upstream.numpy(), rtol=1e-7)

    def test_is_not_a_norm_clip(self):
        x = tf.zeros([3])
        upstream = tf.constant([3e6, 4e6, 0.0])  # norm 5e6
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            loss = tf.reduce_sum(scale_gradient(x, 0.5) * upstream)
            plain = tf.reduce_sum(x * upstream)
        scaled = tape.gradient(loss, x).numpy()
        # Scaling: 0.5 * [3e6, 4e6, 0] = [1.5e6, 2e6, 0], norm 2.5e6 (half of 5e6, whatever its size).
        np.testing.assert_allclose(scaled, [1.5e6, 2e6, 0.0])
        # A norm clip to 0.5 would give [3e6, 4e6, 0] / 5e6 * 0.5 = [0.3, 0.4, 0]: a different gradient.
        clipped = tf.clip_by_norm(tape.gradient(plain, x), 0.5).numpy()
        np.testing.assert_allclose(clipped, [0.3, 0.4, 0.0], rtol=1e-6)
        assert not np.allclose(scaled, clipped)


class TestLearningRate:
    def test_schedule_by_hand(self):
        config = MuZeroConfig(train=TrainConfig(lr_init=0.05, lr_decay_rate=0.1, lr_decay_steps=350e3))
        # lr = 0.05 * 0.1^(step / 350k): 0.05 at 0, 0.005 at 350k, 0.05 * sqrt(0.1) = 0.0158114 at 175k.
        assert learning_rate(config.train, 0) == pytest.approx(0.05)
        assert learning_rate(config.train, 350_000) == pytest.approx(0.005)
        assert learning_rate(config.train, 175_000) == pytest.approx(0.0158113883)

    def test_optimizer_uses_the_same_schedule(self):
        config = MuZeroConfig(train=TrainConfig(lr_init=0.05, lr_decay_rate=0.1, lr_decay_steps=1000, momentum=0.9))
        optimizer = make_optimizer(config.train)
        for step in (0, 500, 1000, 2500):
            optimizer.iterations.assign(step)  # the training step the schedule reads
            assert float(optimizer.learning_rate) == pytest.approx(learning_rate(config.train, step), rel=1e-6)
        assert optimizer.momentum == 0.9

    def test_adam_first_step_by_hand(self):
        # Adam's first step: m = (1 - b1) g and v = (1 - b2) g^2, bias-corrected to g and g^2, so
        # the step is lr * g / (|g| + eps) = lr * sign(g): [1, -2] - 0.1 * [1, -1] = [0.9, -1.9].
        # SGD with momentum from zero velocity steps by lr * g: [1, -2] - 0.1 * [3, -0.5] = [0.7, -1.95].
        for name, expected in (("adam", [0.9, -1.9]), ("sgd", [0.7, -1.95])):
            train = TrainConfig(optimizer=name, lr_init=0.1, lr_decay_rate=0.1, lr_decay_steps=1000, momentum=0.9)
            optimizer = make_optimizer(train)
            x = tf.Variable([1.0, -2.0])
            optimizer.apply_gradients([(tf.constant([3.0, -0.5]), x)])
            np.testing.assert_allclose(x.numpy(), expected, rtol=1e-5)
        assert make_optimizer(TrainConfig(optimizer="adam", momentum=0.8)).beta_1 == 0.8


CARTPOLE = Path(__file__).resolve().parents[1] / "configs" / "cartpole.yaml"
K = 3


def _setup(support_size: int, projection_size: int = 0):
    config = MuZeroConfig(
        game=GameConfig(action_space_size=2),
        network=NetworkConfig(
            hidden_state_size=5,
            hidden_layers=(7,),
            support_size=support_size,
            activation="tanh",
            projection_size=projection_size,
        ),
        train=TrainConfig(num_unroll_steps=K, weight_decay=0.0),
    )
    network = MLPNetwork(config.network, config.action_space_size, observation_size=4)
    rng = np.random.default_rng(3)
    for variable in network.trainable_variables:
        variable.assign(rng.normal(size=variable.shape).astype(np.float32) * 0.7)
    batch_size = 6
    bins = 2 * support_size + 1

    def target(shape):
        if support_size:
            t = rng.random(shape + (bins,)).astype(np.float32)
            return t / t.sum(-1, keepdims=True)
        return rng.normal(size=shape).astype(np.float32)

    policy = rng.random((batch_size, K + 1, 2)).astype(np.float32)
    batch = Batch(
        observation=rng.normal(size=(batch_size, 4)).astype(np.float32),
        actions=rng.integers(2, size=(batch_size, K)).astype(np.int32),
        target_value=target((batch_size, K + 1)),
        target_reward=target((batch_size, K + 1)),
        target_policy=policy / policy.sum(-1, keepdims=True),
        policy_mask=np.array([[1, 1, 1, 0]] * batch_size, np.float32),
    )
    return config, network, batch


def _plain_step_losses(network: MLPNetwork, batch: Batch, support_size: int) -> list:
    """An independent, unscaled unroll: the K + 1 per-step losses (batch means), no scale_gradient.

    Written directly on the Keras models, not through muzero_loss.
    """

    def loss(prediction, target):
        if support_size:
            return -tf.reduce_sum(target * tf.nn.log_softmax(prediction), -1)
        return (prediction[:, 0] - target) ** 2

    def policy_loss(logits, target, mask):
        return -tf.reduce_sum(target * tf.nn.log_softmax(logits), -1) * mask

    def minmax(s):
        low, high = tf.reduce_min(s, -1, keepdims=True), tf.reduce_max(s, -1, keepdims=True)
        return (s - low) / tf.maximum(high - low, 1e-5)

    state = minmax(network.representation(batch.observation)["state"])
    pred = network.prediction(state)
    losses = [
        tf.reduce_mean(
            loss(pred["value"], batch.target_value[:, 0])
            + policy_loss(pred["policy"], batch.target_policy[:, 0], batch.policy_mask[:, 0])
        )
    ]
    for k in range(1, K + 1):
        dyn = network.dynamics(tf.concat([state, tf.one_hot(batch.actions[:, k - 1], 2)], -1))
        state = minmax(dyn["state"])
        pred = network.prediction(state)
        losses.append(
            tf.reduce_mean(
                loss(pred["value"], batch.target_value[:, k])
                + loss(dyn["reward"], batch.target_reward[:, k])
                + policy_loss(pred["policy"], batch.target_policy[:, k], batch.policy_mask[:, k])
            )
        )
    return losses


@pytest.mark.parametrize("support_size", [0, 3])
def test_update_weights_factors_against_independent_computation(support_size):
    _, network, batch = _setup(support_size)
    representation = network.representation.trainable_variables
    prediction = network.prediction.trainable_variables

    with tf.GradientTape() as tape:
        total, metrics, _ = muzero_loss(network, batch, weight_decay=0.0)
    got = tape.gradient(total, representation + prediction)

    # Expected, from per-step gradients of the plain unroll:
    # * the prediction function is applied to each step's state directly, so step k's
    #   loss reaches it with the step weight only: 1 for k = 0, 1/K for k >= 1;
    # * the representation sits under all steps; step k's loss reaches it through k - 1
    #   scaled hidden-state links (the state after recurrent step j is scaled by 0.5 before
    #   step j + 1 uses it), so with weight 1 for k = 0 and (1/K) * 0.5^(k-1) for k >= 1.
    expected_rep = [tf.zeros_like(v) for v in representation]
    expected_pred = [tf.zeros_like(v) for v in prediction]
    for k in range(K + 1):
        with tf.GradientTape() as tape_k:
            step_loss = _plain_step_losses(network, batch, support_size)[k]
        grads = tape_k.gradient(step_loss, representation + prediction)
        rep_w = 1.0 if k == 0 else (1.0 / K) * 0.5 ** (k - 1)
        pred_w = 1.0 if k == 0 else 1.0 / K
        expected_rep = [e + rep_w * g for e, g in zip(expected_rep, grads[: len(representation)])]
        expected_pred = [e + pred_w * g for e, g in zip(expected_pred, grads[len(representation) :])]

    for g, e in zip(got, expected_rep + expected_pred):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=2e-4, atol=1e-6)

    # The forward value is unscaled: the total is the plain sum of the K + 1 step losses.
    plain = _plain_step_losses(network, batch, support_size)
    assert float(total) == pytest.approx(float(tf.add_n(plain)), rel=1e-5)
    for k in range(K + 1):
        assert float(metrics[f"step_{k}"]) == pytest.approx(float(plain[k]), rel=1e-5)

    # Without the 0.5 (scale 1), the representation gradient differs: the factor is really applied.
    with tf.GradientTape() as tape:
        total_unscaled, _, _ = muzero_loss(network, batch, weight_decay=0.0, hidden_state_scale=1.0)
    unscaled = tape.gradient(total_unscaled, representation)
    assert not np.allclose(unscaled[0].numpy(), got[0].numpy(), rtol=1e-3)


def test_weight_decay_is_l2_loss_of_all_weights():
    _, network, batch = _setup(3)
    _, metrics, _ = muzero_loss(network, batch, weight_decay=1e-4)
    # tf.nn.l2_loss(w) = sum(w^2) / 2, over every trainable array, biases included.
    expected = 1e-4 * sum(0.5 * np.sum(v.numpy() ** 2) for v in network.trainable_variables)
    assert float(metrics["l2"]) == pytest.approx(expected, rel=1e-5)


def test_initial_step_has_no_reward_loss_and_absorbing_states_no_policy_loss():
    _, network, batch = _setup(3)
    # Changing the initial reward target or the policy target where the mask is 0 changes nothing.
    reward = batch.target_reward.copy()
    reward[:, 0] = np.roll(reward[:, 0], 1, axis=-1)
    policy = batch.target_policy.copy()
    policy[:, 3] = policy[:, 3, ::-1]
    base, _, _ = muzero_loss(network, batch, 0.0)
    changed, _, _ = muzero_loss(network, batch._replace(target_reward=reward, target_policy=policy), 0.0)
    assert float(base) == pytest.approx(float(changed), rel=1e-6)


@pytest.mark.parametrize("support_size", [0, 3])
def test_target_entropies_are_the_floor_under_the_value_and_policy_losses(support_size):
    _, network, batch = _setup(support_size)
    _, metrics, _ = muzero_loss(network, batch, 0.0)

    def entropy(p):  # nats, per sample
        return -np.sum(p * np.log(p), axis=-1)

    # Summed over the K + 1 steps as `loss/policy` is, with the mask of absorbing states (step 3 here).
    policy = sum(np.mean(entropy(batch.target_policy[:, k]) * batch.policy_mask[:, k]) for k in range(K + 1))
    assert float(metrics["policy_target_entropy"]) == pytest.approx(policy, rel=1e-5)
    # Cross-entropy = target entropy + KL >= target entropy.
    assert float(metrics["policy"]) >= float(metrics["policy_target_entropy"])
    if not support_size:  # scalar values (MSE): no such floor
        assert "value_target_entropy" not in metrics
        return
    value = sum(np.mean(entropy(batch.target_value[:, k])) for k in range(K + 1))
    assert float(metrics["value_target_entropy"]) == pytest.approx(value, rel=1e-5)
    assert float(metrics["value"]) >= float(metrics["value_target_entropy"])


def test_learner_step_does_not_retrace():
    config, network, batch = _setup(3)
    learner = Learner(config.train, network)
    scalar_value = np.zeros(batch.target_value.shape[:2], np.float32)  # Learner two-hots scalar targets
    batch = batch._replace(target_value=scalar_value, target_reward=scalar_value)
    for size in (6, 3, 5):
        learner.train_step(batch.take(slice(size)))
    assert learner.tracing_count() == 1
    assert learner.training_step == 3 and network.training_steps() == 3


def test_the_learner_samples_with_the_reanalyse_horizon_while_reanalyse_is_on():
    from muzero.config import ReanalyseConfig
    from muzero.factories import make_learner

    config, network, _ = _setup(3)
    config = config.replace(train=dataclasses.replace(config.train, td_steps=10))
    # Reanalyse off: train.td_steps (10); on (fraction 0.8): reanalyse.td_steps (5), the
    # paper's horizon for value targets bootstrapped from the target network.
    assert make_learner(config, network).td_steps == 10
    assert make_learner(config.replace(reanalyse=ReanalyseConfig(fraction=0.8, td_steps=5)), network).td_steps == 5


def test_gradient_norm_summaries_every_interval():
    config, network, batch = _setup(3)
    learner = Learner(config.train, network, grad_summary_interval=2)
    scalar = np.zeros(batch.target_value.shape[:2], np.float32)
    batch = batch._replace(target_value=scalar, target_reward=scalar)
    first, second = learner.train_step(batch), learner.train_step(batch)
    # Steps 1 and 2 with interval 2: only step 2 carries the grad/ norms.
    assert not any(name.startswith("grad/") for name in first)
    names = {f"grad/hidden_state_step_{k}" for k in range(K + 1)} | {
        "grad/representation_norm",
        "grad/dynamics_norm",
        "grad/prediction_norm",
        "grad/global_norm",
    }
    assert names <= set(second)
    # The global norm is the root of the summed squares of the three functions' norms.
    parts = [second[f"grad/{n}_norm"] for n in ("representation", "dynamics", "prediction")]
    assert second["grad/global_norm"] == pytest.approx(np.sqrt(np.sum(np.square(parts))), rel=1e-5)
    assert learner.tracing_count() == 1


def test_train_network_publishes_every_checkpoint_interval():
    from muzero.config import ReplayConfig
    from muzero.envs import EnvironmentSpec
    from muzero.factories import make_replay_buffer
    from muzero.game import Game
    from muzero.storage import SharedStorage
    from muzero.training import train_network

    config, network, _ = _setup(3)
    config = config.replace(
        train=dataclasses.replace(config.train, batch_size=4, checkpoint_interval=2),
        replay=ReplayConfig(window_size=10),
    )
    learner = Learner(config.train, network)
    game = Game(action_space_size=2, discount=config.discount)
    game.observations = [np.full(4, i, np.float32) for i in range(6)]
    game.history, game.rewards = [0, 1, 0, 1, 0], [1.0] * 5
    game.root_values, game.child_visits = [1.0] * 5, [[0.5, 0.5]] * 5
    buffer = make_replay_buffer(config, EnvironmentSpec((4,), np.float32, 2, 1), np.random.default_rng(0))
    buffer.save_game(game)
    storage = SharedStorage(2)
    published = []
    original = storage.save_network
    storage.save_network = lambda step, net: (published.append(step), original(step, net))
    metrics = train_network(config.train, learner, buffer, storage, num_steps=5)
    # Saved at steps 0, 2 and 4 (every checkpoint_interval = 2) and once at the end (5).
    assert published == [0, 2, 4, 5] and learner.training_step == 5
    assert storage.latest_network().training_steps() == 5 and np.isfinite(metrics["loss/total"])


@pytest.mark.parametrize("support_size", [0, 3])
def test_importance_weights_scale_each_samples_loss(support_size):
    _, network, batch = _setup(support_size)
    # Per-sample losses: the loss of one-sample batches (weight decay 0: nothing else).
    per_sample = np.array([float(muzero_loss(network, batch.take([i]), 0.0)[0]) for i in range(6)])
    # Two samples with weights [2, 0]: (2 * loss_0 + 0 * loss_1) / 2 = loss_0.
    pair = batch.take([0, 1])._replace(importance_weight=np.array([2.0, 0.0], np.float32))
    with tf.GradientTape() as tape:
        total, _, _ = muzero_loss(network, pair, 0.0)
    assert float(total) == pytest.approx(per_sample[0], rel=1e-5)
    # ... and so is its gradient: sample 1 contributes nothing.
    with tf.GradientTape() as tape_0:
        alone, _, _ = muzero_loss(network, batch.take([0]), 0.0)
    variables = network.trainable_variables
    for g, e in zip(tape.gradient(total, variables), tape_0.gradient(alone, variables)):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-4, atol=1e-6)
    # All six: the weighted batch mean sum_i w_i * loss_i / 6.
    w = np.array([2.0, 0.0, 1.0, 0.5, 3.0, 0.25], np.float32)
    total, metrics, _ = muzero_loss(network, batch._replace(importance_weight=w), 0.0)
    assert float(total) == pytest.approx(np.sum(w * per_sample) / 6, rel=1e-5)
    # The logged parts stay unweighted batch means.
    unweighted, plain, _ = muzero_loss(network, batch, 0.0)
    assert float(metrics["value"]) == float(plain["value"]) and float(metrics["policy"]) == float(plain["policy"])
    assert float(unweighted) == pytest.approx(per_sample.mean(), rel=1e-5)


def test_weights_of_one_give_exactly_the_unweighted_loss_and_gradients():
    _, network, batch = _setup(3)
    variables = network.trainable_variables
    results = []
    for weights in (None, np.ones(6, np.float32)):
        with tf.GradientTape() as tape:
            total, _, _ = muzero_loss(network, batch._replace(importance_weight=weights), 1e-4)
        results.append((total.numpy(), [g.numpy() for g in tape.gradient(total, variables)]))
    (a, grads_a), (b, grads_b) = results
    assert a == b  # bit for bit: x * 1.0 is x, and so is the gradient
    for x, y in zip(grads_a, grads_b):
        np.testing.assert_array_equal(x, y)


def test_learner_returns_the_initial_value_for_priorities():
    from muzero.replay import priority

    config, network, batch = _setup(3)
    learner = Learner(config.train, network)
    scalar = np.linspace(-1.0, 1.0, 6 * (K + 1), dtype=np.float32).reshape(6, K + 1)
    batch = batch._replace(target_value=scalar, target_reward=np.zeros_like(scalar))
    expected = network.initial_inference(batch.observation).value.numpy()  # before the update
    metrics = learner.train_step(batch._replace(importance_weight=np.full(6, 0.5, np.float32)))
    np.testing.assert_allclose(metrics["initial_value"], expected, rtol=1e-5, atol=1e-6)
    assert metrics["initial_value"].shape == (6,) and learner.tracing_count() == 1
    # New priority |v_0 - z_0| from the scalar target before its two-hot transform.
    np.testing.assert_allclose(
        priority(metrics["initial_value"], batch.target_value[:, 0]),
        np.abs(expected - scalar[:, 0]),
        rtol=1e-5,
        atol=1e-6,
    )


class TestConsistencyLoss:
    def test_cosine_of_centred_states_by_hand(self):
        predicted = tf.constant([[1.0, 0.0, 0.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [5.0, 0.0, 1.0]])
        target = tf.constant([[0.0, 1.0, 0.0], [11.0, 12.0, 13.0], [0.0, 2.0, 4.0], [3.0, 2.0, 1.0], [0.0, 1.0, 0.0]])
        mask = tf.constant([1.0, 1.0, 1.0, 1.0, 0.0])
        # Centred: (2, -1, -1)/3 against (-1, 2, -1)/3: cos = (-2 - 2 + 1) / 6 = -0.5, loss 1.5.
        # (1, 2, 3) against (11, 12, 13) or (0, 2, 4): both centre to multiples of (-1, 0, 1): 0.
        # Against (3, 2, 1): (-1, 0, 1) and (1, 0, -1), opposite: 2. The masked row: 0.
        np.testing.assert_allclose(
            consistency_loss(predicted, target, mask).numpy(), [1.5, 0.0, 0.0, 2.0, 0.0], atol=1e-6
        )

    def test_no_gradient_through_the_target(self):
        predicted, target = tf.Variable([[1.0, 0.0, 0.0]]), tf.Variable([[0.0, 1.0, 0.0]])
        with tf.GradientTape() as tape:
            loss = consistency_loss(predicted, target, tf.ones([1]))
        grad_predicted, grad_target = tape.gradient(loss, [predicted, target])
        # u = centred p = (2, -1, -1)/3, |u| = sqrt(6)/3; unit vectors û = (2, -1, -1)/sqrt(6),
        # v̂ = (-1, 2, -1)/sqrt(6), cos = -0.5. d(1 - cos)/du = -(v̂ - cos û)/|u|
        # = -(0, 1.5, -1.5)/sqrt(6) * 3/sqrt(6) = (0, -0.75, 0.75), already centred, so d/dp too.
        np.testing.assert_allclose(grad_predicted.numpy(), [[0.0, -0.75, 0.75]], atol=1e-6)
        assert grad_target is None

    def test_muzero_loss_adds_weighted_cosines_of_the_unrolled_states(self):
        _, network, batch = _setup(0)
        rng = np.random.default_rng(5)
        unrolled = rng.normal(size=(6, K, 4)).astype(np.float32)
        mask = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 0, 0], [1, 1, 1]], np.float32)
        batch = batch._replace(unroll_observation=unrolled, unroll_mask=mask)
        plain, _, _ = muzero_loss(network, batch, 0.0)
        with_consistency, metrics, _ = muzero_loss(network, batch, 0.0, consistency_loss_weight=2.0)

        # Independently, on the Keras models: the dynamics' min-max scaled state after k real
        # actions against the scaled representation of the k-th unrolled observation.
        def minmax(s):
            low, high = tf.reduce_min(s, -1, keepdims=True), tf.reduce_max(s, -1, keepdims=True)
            return (s - low) / tf.maximum(high - low, 1e-5)

        def unit(x):  # centred on each row's mean, then unit length
            x = x - x.mean(-1, keepdims=True)
            return x / np.linalg.norm(x, axis=-1, keepdims=True)

        state = minmax(network.representation(batch.observation)["state"])
        expected = np.zeros(6)
        for k in range(1, K + 1):
            state = minmax(network.dynamics(tf.concat([state, tf.one_hot(batch.actions[:, k - 1], 2)], -1))["state"])
            target = minmax(network.representation(unrolled[:, k - 1])["state"]).numpy()
            expected += (1 - np.sum(unit(state.numpy()) * unit(target), -1)) * mask[:, k - 1]
        # The loss value is the plain one plus w * the batch mean of the summed step cosines
        # (the 1/K of recurrent steps scales gradients, not values, as for the other parts).
        assert float(metrics["consistency"]) == pytest.approx(expected.mean(), rel=1e-5)
        assert float(with_consistency) - float(plain) == pytest.approx(2.0 * expected.mean(), rel=1e-4)

    def test_plain_cosine_by_hand(self):
        # EfficientZero's heads: no centring. (1, 0, 0) against (1, 1, 0): cos = 1 / sqrt(2), loss
        # 1 - 0.70711 = 0.29289; (1, 2, 3) against (2, 4, 6): parallel, 0; (1, 0, 0) against
        # (-3, 0, 0): opposite, 2. Centred, the first pair would give 1 - (-0.5) = 1.5 instead.
        predicted = tf.constant([[1.0, 0.0, 0.0], [1.0, 2.0, 3.0], [1.0, 0.0, 0.0]])
        target = tf.constant([[1.0, 1.0, 0.0], [2.0, 4.0, 6.0], [-3.0, 0.0, 0.0]])
        loss = consistency_loss(predicted, target, tf.ones([3]), centred=False)
        np.testing.assert_allclose(loss.numpy(), [1 - 2**-0.5, 0.0, 2.0], atol=1e-6)

    def test_muzero_loss_with_efficientzero_heads_compares_projections(self):
        _, network, batch = _setup(0, projection_size=8)
        assert set(network.models) == {"representation", "dynamics", "prediction", "projection", "projection_head"}
        rng = np.random.default_rng(5)
        unrolled = rng.normal(size=(6, K, 4)).astype(np.float32)
        mask = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 0, 0], [1, 1, 1]], np.float32)
        batch = batch._replace(unroll_observation=unrolled, unroll_mask=mask)
        plain, _, _ = muzero_loss(network, batch, 0.0)
        with tf.GradientTape() as tape:
            with_consistency, metrics, _ = muzero_loss(network, batch, 0.0, consistency_loss_weight=2.0)
        gradients = tape.gradient(with_consistency, network.projection_head.trainable_variables)
        assert all(g is not None and float(tf.reduce_max(tf.abs(g))) > 0 for g in gradients)

        def minmax(s):
            low, high = tf.reduce_min(s, -1, keepdims=True), tf.reduce_max(s, -1, keepdims=True)
            return (s - low) / tf.maximum(high - low, 1e-5)

        def unit(x):  # plain: no centring
            return x / np.linalg.norm(x, axis=-1, keepdims=True)

        # Independently, on the Keras models: the target side is the projection of the scaled
        # representations of all B * K unrolled observations (one batch, as batch norm sees
        # them); the dynamics' side is the prediction head over the projection, per step.
        flat = minmax(network.representation(unrolled.reshape(-1, 4))["state"])
        targets = network.projection(flat, training=True).numpy().reshape(6, K, 8)
        state = minmax(network.representation(batch.observation)["state"])
        expected = np.zeros(6)
        for k in range(1, K + 1):
            state = minmax(network.dynamics(tf.concat([state, tf.one_hot(batch.actions[:, k - 1], 2)], -1))["state"])
            predicted = network.projection_head(network.projection(state, training=True), training=True).numpy()
            expected += (1 - np.sum(unit(predicted) * unit(targets[:, k - 1]), -1)) * mask[:, k - 1]
        assert float(metrics["consistency"]) == pytest.approx(expected.mean(), rel=1e-5)
        assert float(with_consistency) - float(plain) == pytest.approx(2.0 * expected.mean(), rel=1e-4)

    def test_heads_travel_with_the_weights_and_need_the_loss(self):
        _, network, _ = _setup(0, projection_size=8)
        copy = _setup(0, projection_size=8)[1]
        for variable in copy.trainable_variables:
            variable.assign(tf.zeros_like(variable))
        copy.set_weights(network.get_weights())
        for a, b in zip(network.projection_head.get_weights(), copy.projection_head.get_weights()):
            np.testing.assert_array_equal(a, b)
        # Self-play's numpy mirror ignores the heads: the same inference as without them.
        observation = np.ones((2, 4), np.float32)
        np.testing.assert_allclose(
            network.published_network().initial_inference(observation).value,
            network.initial_inference(observation).value,
            rtol=1e-5,
            atol=1e-6,
        )
        # The compiled search loads the mirror's weights into a Keras copy built with the heads: all
        # of them arrive, the heads too, which the mirror carries without evaluating them. Without
        # them this raised a KeyError on 'projection', stopping CartPole's training at its first search.
        copy = _setup(0, projection_size=8)[1]
        for variable in copy.trainable_variables:
            variable.assign(tf.zeros_like(variable))
        copy.set_weights(network.published_network().weights)
        np.testing.assert_allclose(
            copy.initial_inference(observation).value, network.initial_inference(observation).value, rtol=1e-5
        )
        for a, b in zip(network.projection_head.get_weights(), copy.projection_head.get_weights()):
            np.testing.assert_array_equal(a, b)
        # Heads without the loss they serve are refused in one line.
        with pytest.raises(ConfigError, match="network.projection_size: .*train.consistency_loss_weight > 0"):
            load_config(CARTPOLE, ["network.projection_size=8"])

    def test_resnet_heads_read_the_latent_planes_with_value_prefix(self):
        net = NetworkConfig(
            kind="resnet",
            planes=2,
            blocks=0,
            downsample=False,
            hidden_layers=(4,),
            support_size=0,
            value_prefix=True,
            lstm_hidden_size=1,
            projection_size=6,
        )
        network = ResNetwork(net, 2, (3, 3, 1), np.float32)
        # The hidden state is [3, 3, 3]: the latent planes [3, 3, 2] and one plane of h, c, prefix
        # and count. The projection reads the latent planes only (18 numbers).
        assert network.hidden_shape == (3, 3, 3) and tuple(network.projection.inputs[0].shape) == (None, 3, 3, 2)
        observation = np.random.default_rng(0).random((4, 3, 3, 1)).astype(np.float32)
        hidden = network.initial_inference(observation).hidden_state
        projected = network.projection_head(network.projection(network.latent(hidden), training=True), training=True)
        assert projected.shape == (4, 6)

    def test_learner_trains_with_it_without_retracing(self):
        config, network, batch = _setup(3)
        config = config.replace(train=dataclasses.replace(config.train, consistency_loss_weight=1.0))
        learner = Learner(config.train, network)
        scalar = np.zeros(batch.target_value.shape[:2], np.float32)
        unrolled = np.random.default_rng(1).normal(size=(6, K, 4)).astype(np.float32)
        batch = batch._replace(
            target_value=scalar,
            target_reward=scalar,
            unroll_observation=unrolled,
            unroll_mask=np.ones((6, K), np.float32),
        )
        for size in (6, 3):
            metrics = learner.train_step(batch.take(slice(size)))
        assert learner.tracing_count() == 1 and 0.0 <= metrics["loss/consistency"] <= 2.0 * K
