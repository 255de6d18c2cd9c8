"""EfficientZero's value prefix (`network.value_prefix`): the targets, the networks' augmented
hidden state and its resets, the search's view of it, and end-to-end runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from muzero.config import MuZeroConfig, NetworkConfig, SearchConfig, TrainConfig
from muzero.networks.base import Network, NetworkOutput
from muzero.networks.compat import network_shapes
from muzero.networks.mlp import MLPNetwork
from muzero.networks.resnet import ResNetwork
from muzero.replay import Batch
from muzero.replay.targets import value_prefix_targets
from muzero.search.reference import ActionHistory, Node, expand_node, run_mcts
from muzero.training import Learner
from tests.helpers import ROOT, muzero_command

TINY = str(ROOT / "configs" / "tiny.yaml")
MINATAR_TINY = str(ROOT / "configs" / "minatar" / "tiny.yaml")


def test_prefix_targets_sum_the_rewards_since_the_last_reset():
    # Rewards into steps k = 0..5 (k = 0 has none): 0, 1, 2, 3, 4, 5.
    rewards = np.array([[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]], np.float32)
    # Horizon 2: the LSTM restarts before steps 1, 3 and 5, so
    # k=1: 1; k=2: 1 + 2 = 3; k=3: 3 (restart); k=4: 3 + 4 = 7; k=5: 5 (restart).
    np.testing.assert_array_equal(value_prefix_targets(rewards, 2), [[0, 1, 3, 3, 7, 5]])
    # Horizon 5 (EfficientZero's): no restart inside K = 5 steps: 1, 1+2, 1+2+3, ... = 1, 3, 6, 10, 15.
    np.testing.assert_array_equal(value_prefix_targets(rewards, 5), [[0, 1, 3, 6, 10, 15]])
    # Horizon 1: a restart before every step: the prefix is the step's own reward.
    np.testing.assert_array_equal(value_prefix_targets(rewards, 1), rewards)


def test_the_learner_fits_the_reward_head_to_prefix_targets():
    network = MLPNetwork(_net(support_size=0, value_prefix_horizon=2), 2, 3)
    learner = Learner(TrainConfig(num_unroll_steps=3, batch_size=1), network)
    batch = Batch(
        observation=np.zeros((1, 3), np.float32),
        actions=np.zeros((1, 3), np.int32),
        target_value=np.zeros((1, 4), np.float32),
        target_reward=np.array([[0.0, 1.0, 2.0, 3.0]], np.float32),
        target_policy=np.full((1, 4, 2), 0.5, np.float32),
        policy_mask=np.ones((1, 4), np.float32),
    )
    # Horizon 2: k=1: 1; k=2: 1 + 2 = 3; k=3: 3 (the LSTM restarted).
    np.testing.assert_array_equal(learner.prepare(batch).target_reward, [[0, 1, 3, 3]])
    # The scalar prefix the network predicts along the unroll (weights before the step): the
    # reward loss is then sum_k (prefix_k - target_k)^2 over k = 1..3 (scalar heads: squared error).
    output, prefixes = network.initial_inference(batch.observation), []
    for k in range(3):
        output = network.recurrent_inference(output.hidden_state, batch.actions[:, k])
        prefixes.append(float(output.reward_logits[0]))
    expected = sum((p - t) ** 2 for p, t in zip(prefixes, [1.0, 3.0, 3.0]))
    metrics = learner.train_step(batch)
    assert metrics["train/finite"] == 1.0
    np.testing.assert_allclose(metrics["loss/reward"], expected, rtol=1e-5)


def _net(**overrides) -> NetworkConfig:
    """A value-prefix network section: H = 2, no hidden layers, scalar heads, u = 1, unless overridden."""
    settings = {"hidden_state_size": 2, "hidden_layers": (), "support_size": 0, "lstm_hidden_size": 1}
    return NetworkConfig(**{**settings, "value_prefix": True, **overrides})


# Hand-set LSTM: kernel 0, so the gates are their biases; bias (i, f, g, o) = (20, 0, atanh(0.5), 20):
# sigmoid(20) = 1 - 2e-9 ~ 1, sigmoid(0) = 0.5, tanh(atanh(0.5)) = 0.5. From a zero state:
# c1 = 0.5 * 0 + 1 * 0.5 = 0.5, h1 = tanh(0.5) = 0.46211716;
# c2 = 0.5 * 0.5 + 0.5 = 0.75, h2 = tanh(0.75) = 0.63514895.
# Reward (prefix) head: 2 * h, so prefix1 = 0.92423431 and prefix2 = 1.27029790.
LSTM_BIAS = np.array([20.0, 0.0, math.atanh(0.5), 20.0], np.float32)
PREFIX_1 = 2 * math.tanh(0.5)
PREFIX_2 = 2 * math.tanh(0.75)


def _hand_set(model, features: int) -> None:
    model.get_layer("lstm").set_weights([np.zeros((features + 1, 4), np.float32), LSTM_BIAS])
    model.get_layer("reward").set_weights([np.full((1, 1), 2.0, np.float32), np.zeros(1, np.float32)])


def _rewards_and_counts(network, observation, steps: int, layout):
    """The first sample's reward and step count (read through `layout`, a `ValuePrefixState`) per step."""
    output = network.initial_inference(observation)
    rewards, counts = [], []
    for _ in range(steps):
        output = network.recurrent_inference(output.hidden_state, np.zeros(len(observation), np.int32))
        rewards.append(float(np.asarray(output.reward)[0]))
        counts.append(float(layout.unpack(output.hidden_state)[3][0]))
    return rewards, counts


# Horizon 2: steps 1 and 3 start from a zero LSTM state and a parent prefix of 0 (the reward is
# the prefix itself, 0.92423), step 2 and 4 continue it (reward = prefix2 - prefix1 = 0.34606).
EXPECTED_REWARDS = [PREFIX_1, PREFIX_2 - PREFIX_1, PREFIX_1, PREFIX_2 - PREFIX_1]
# The count of steps since the last reset, modulo the horizon: 1, 0 (reset next), 1, 0.
EXPECTED_COUNTS = [1.0, 0.0, 1.0, 0.0]


def test_mlp_reward_is_the_prefix_difference_and_restarts_at_the_horizon():
    network = MLPNetwork(_net(value_prefix_horizon=2), 2, 3)
    # dynamics' LSTM input: the last hidden layer, here (no hidden layers) [latent 2, one-hot 2].
    _hand_set(network.dynamics, 2 + 2)
    observation = np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)
    # [B, H + 2u + 2] = [2, 2 + 2 + 2].
    assert network.initial_inference(observation).hidden_state.shape == (2, 6)
    for candidate in (network, network.published_network()):  # Keras, then its numpy mirror
        rewards, counts = _rewards_and_counts(candidate, observation, 4, network.prefix_state)
        np.testing.assert_allclose(rewards, EXPECTED_REWARDS, rtol=1e-6)
        assert counts == EXPECTED_COUNTS


def test_resnet_reward_is_the_prefix_difference_and_restarts_at_the_horizon():
    net = _net(kind="resnet", planes=2, blocks=0, downsample=False, value_prefix_horizon=2)
    network = ResNetwork(net, 2, (3, 3, 1), np.float32)
    # The latent state [3, 3, 2]; h, c, prefix and count (2 * 1 + 2 = 4 numbers) fit one 3x3 plane.
    assert network.latent_shape == (3, 3, 2) and network.hidden_shape == (3, 3, 3)
    # The LSTM reads the reward head's flattened 1x1 convolution: 3 * 3 = 9 features.
    _hand_set(network.dynamics, 9)
    observation = np.random.default_rng(0).random((2, 3, 3, 1)).astype(np.float32)
    rewards, counts = _rewards_and_counts(network, observation, 4, network.prefix_state)
    np.testing.assert_allclose(rewards, EXPECTED_REWARDS, rtol=1e-6)
    assert counts == EXPECTED_COUNTS


def test_numpy_mlp_equals_keras_with_value_prefix():
    network = MLPNetwork(_net(hidden_state_size=4, hidden_layers=(8,), support_size=3, lstm_hidden_size=3), 2, 4)
    mirror = network.published_network()
    observation = np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32)
    keras_output, numpy_output = network.initial_inference(observation), mirror.initial_inference(observation)
    np.testing.assert_allclose(keras_output.hidden_state, numpy_output.hidden_state, atol=1e-6)
    hidden_state = numpy_output.hidden_state
    for step in range(7):  # past a reset at the default horizon 5
        action = np.array([0, 1, 0, 1, step % 2])
        keras_output = network.recurrent_inference(hidden_state, action)
        numpy_output = mirror.recurrent_inference(hidden_state, action)
        for name in ("value", "reward", "policy_logits", "hidden_state"):
            # The tolerance of tests/test_network.py's Keras-numpy comparison (support_to_scalar differs ~1e-5).
            np.testing.assert_allclose(
                np.asarray(getattr(keras_output, name)), getattr(numpy_output, name), rtol=1e-4, atol=1e-4
            )
        hidden_state = numpy_output.hidden_state


def test_checkpoint_shapes_cover_the_lstm():
    spec = type("Spec", (), {"observation_shape": (4,), "action_space_size": 2, "board_shape": None})()
    net = _net(hidden_state_size=4, hidden_layers=(8,), support_size=3, lstm_hidden_size=3)
    network = MLPNetwork(net, 2, 4)
    actual = {
        f"{function}/{layer}/{kind}": values[i].shape
        for function, layers in network.get_weights().items()
        for layer, values in layers.items()
        for i, kind in enumerate(("kernel", "bias"))
    }
    expected = {name: shape for name, shape in network_shapes(net, spec).items() if "/" in name}
    assert actual == expected
    # The LSTM over [last hidden layer 8, h 3]: kernel (8 + 3, 4 * 3); the prefix head reads h (3).
    assert expected["dynamics/lstm/kernel"] == (11, 12) and expected["dynamics/reward/kernel"] == (3, 7)
    resnet = network_shapes(NetworkConfig(kind="resnet", value_prefix=True), _image_spec())
    assert resnet["network.value_prefix"] is True and resnet["network.lstm_hidden_size"] == 32


def _image_spec():
    return type("Spec", (), {"observation_shape": (10, 10, 4), "action_space_size": 3, "board_shape": None})()


class PrefixDifferences(Network):
    """A plain-reward network built from a value-prefix one: its hidden state is the root's
    augmented state and the actions since the root; each inference replays the path from the root
    and emits the reward by the paper's rule, prefix(d) - prefix(d - 1), with the parent's prefix
    0 when the parent's depth d - 1 is a multiple of the horizon."""

    def __init__(self, prefix_network, horizon: int, max_depth: int = 64):
        self.network, self.horizon, self.max_depth = prefix_network, horizon, max_depth

    def initial_inference(self, observation) -> NetworkOutput:
        output = self.network.initial_inference(observation)
        path = np.zeros((len(observation), 1 + self.max_depth), np.float32)  # depth, then the actions
        return output._replace(hidden_state=np.concatenate([output.hidden_state, path], axis=-1))

    def recurrent_inference(self, hidden_state, action) -> NetworkOutput:
        hidden_state = np.array(hidden_state, np.float32)
        root, path = hidden_state[:, : -1 - self.max_depth], hidden_state[:, -1 - self.max_depth :]
        depth = int(path[0, 0]) + 1
        path[0, depth] = action[0]
        path[0, 0] = depth
        state, prefixes = root, []
        for a in path[0, 1 : depth + 1]:
            output = self.network.recurrent_inference(state, np.array([int(a)]))
            state = output.hidden_state
            prefixes.append(float(state[0, -2]))  # the prefix the node stores
        parent = 0.0 if (depth - 1) % self.horizon == 0 else prefixes[-2]
        reward = np.array([prefixes[-1] - parent], np.float32)
        return output._replace(reward=reward, hidden_state=np.concatenate([root, path], axis=-1))


def _search(network, observation, config: MuZeroConfig) -> Node:
    root = Node(0)
    expand_node(root, 0, [0, 1], network.initial_inference(observation).item(0))
    run_mcts(config, root, ActionHistory([], 2), network)
    return root


def _tree(node: Node, depth: int = 0) -> list:
    """(depth, action, visits, reward, value) of every visited node, depth first."""
    rows = []
    for action, child in sorted(node.children.items()):
        if child.visit_count:
            rows.append((depth + 1, action, child.visit_count, child.reward, child.value()))
            rows += _tree(child, depth + 1)
    return rows


def test_reference_search_sees_the_same_tree_as_with_the_prefix_differences():
    horizon = 2
    net = _net(
        hidden_state_size=4, hidden_layers=(8,), support_size=3, lstm_hidden_size=3, value_prefix_horizon=horizon
    )
    prefix_network = MLPNetwork(net, 2, 4)
    numpy_network = prefix_network.published_network()
    config = MuZeroConfig(search=SearchConfig(num_simulations=40))
    observation = np.random.default_rng(2).normal(size=(1, 4)).astype(np.float32)
    with_prefix = _tree(_search(numpy_network, observation, config))
    with_rewards = _tree(_search(PrefixDifferences(numpy_network, horizon), observation, config))
    assert max(row[0] for row in with_prefix) >= 3  # deep enough to cross a reset (after depth 2)
    assert [row[:3] for row in with_prefix] == [row[:3] for row in with_rewards]
    np.testing.assert_allclose([row[3:] for row in with_prefix], [row[3:] for row in with_rewards], atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("config", "settings", "steps"),
    [
        # The MLP, self-play by the reference search on the numpy mirror.
        (TINY, ("network.lstm_hidden_size=4",), 20),
        # The resnet in the compiled search (PublishedWeights run by its Keras twin), augmented planes.
        (MINATAR_TINY, ("run.eval_interval=0",), 6),
    ],
    ids=["tiny", "minatar_tiny"],
)
def test_tiny_runs_with_value_prefix(tmp_path, config, settings, steps):
    settings = ("network.value_prefix=true", "network.value_prefix_horizon=2", *settings)
    overrides = [arg for setting in settings for arg in ("--set", setting)]
    result = muzero_command("train", "--config", config, *overrides, "--logdir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"done: {steps} training steps" in result.stderr
