"""Tests for muzero/search.py: each expected number is derived by hand in a comment."""

from __future__ import annotations

import math

import numpy as np
import pytest

from muzero.config import GameConfig, KnownBounds, MuZeroConfig, SearchConfig, TemperatureSchedule
from muzero.networks.base import NetworkOutput
from muzero.search.reference import (
    ActionHistory,
    MinMaxStats,
    Node,
    add_exploration_noise,
    backpropagate,
    expand_node,
    run_mcts,
    select_action,
    select_child,
    ucb_score,
    value_for_parent,
)


def _config(discount: float = 0.997, ucb_value: str = "pseudocode", **search) -> MuZeroConfig:
    return MuZeroConfig(game=GameConfig(discount=discount), search=SearchConfig(ucb_value=ucb_value, **search))


def _node(visits: int, value_sum: float = 0.0, prior: float = 0.0, reward: float = 0.0, to_play: int = 0) -> Node:
    node = Node(prior)
    node.visit_count, node.value_sum, node.reward, node.to_play = visits, value_sum, reward, to_play
    return node


class TestMinMaxStats:
    def test_without_bounds_normalizes_only_once_a_range_exists(self):
        stats = MinMaxStats(None)
        # Starts at max=-inf, min=+inf: max > min is false, value returned unchanged.
        assert stats.normalize(5.0) == 5.0
        stats.update(2.0)
        # One value seen: max == min, still unchanged.
        assert stats.normalize(5.0) == 5.0
        stats.update(6.0)
        # (5 - 2) / (6 - 2) = 0.75
        assert stats.normalize(5.0) == pytest.approx(0.75)

    def test_known_bounds_seed_the_range_and_updates_widen_it(self):
        stats = MinMaxStats(KnownBounds(-1.0, 1.0))
        # (0 - (-1)) / (1 - (-1)) = 0.5
        assert stats.normalize(0.0) == pytest.approx(0.5)
        stats.update(0.5)  # inside the bounds: no change
        assert stats.normalize(0.0) == pytest.approx(0.5)
        stats.update(3.0)
        # (0 + 1) / (3 + 1) = 0.25
        assert stats.normalize(0.0) == pytest.approx(0.25)

    def test_min_value_range_is_the_smallest_divisor(self):
        # EfficientZero's value_delta_max: values 0.002 apart are not stretched over [0, 1].
        stats = MinMaxStats(None, min_value_range=0.01)
        stats.update(0.010)
        stats.update(0.012)
        # (0.012 - 0.010) / max(0.002, 0.01) = 0.2, where the pseudocode's gives 0.002 / 0.002 = 1.
        assert stats.normalize(0.012) == pytest.approx(0.2)
        assert MinMaxStats(None).normalize(0.012) == 0.012  # no range yet: unchanged either way
        stats.update(1.010)
        # A range of 1 is above 0.01: (0.51 - 0.01) / 1 = 0.5, as without it.
        assert stats.normalize(0.510) == pytest.approx(0.5)


class TestUcbScore:
    def test_visited_child_pseudocode_variant(self):
        config = _config(discount=0.997)
        parent = _node(visits=10)
        child = _node(visits=2, value_sum=1.0, prior=0.3, reward=0.2)
        stats = MinMaxStats(KnownBounds(0.0, 1.0))
        # pb_c = ln((10 + 19652 + 1) / 19652) + 1.25 = ln(1.000559740) + 1.25 = 1.250559583
        # pb_c *= sqrt(10) / (2 + 1) = 1.054092553 -> 1.318205541
        # prior_score = 0.3 * 1.318205541 = 0.395461662
        # value_score = reward + discount * normalize(0.5) = 0.2 + 0.997 * 0.5 = 0.6985
        assert ucb_score(config, parent, child, stats) == pytest.approx(0.395461662 + 0.6985, abs=1e-8)

    def test_normalized_q_variant_normalizes_reward_plus_value(self):
        config = _config(discount=0.5, ucb_value="normalized_q")
        parent = _node(visits=4)
        child = _node(visits=1, value_sum=2.0, prior=0.5, reward=1.0)
        stats = MinMaxStats(KnownBounds(0.0, 4.0))
        # pb_c = ln((4 + 19652 + 1) / 19652) + 1.25 = ln(1 + x) + 1.25 with x = 5/19652 = 0.000254427,
        #   ln(1 + x) = x - x^2/2 = 0.000254395 -> 1.250254395; * sqrt(4) / (1 + 1) = 1.250254395
        # prior_score = 0.5 * 1.250254395 = 0.625127197
        # value_score = normalize(1 + 0.5 * 2) = 2 / 4 = 0.5
        assert ucb_score(config, parent, child, stats) == pytest.approx(0.625127197 + 0.5, abs=1e-8)

    def test_unvisited_child_has_no_value_score(self):
        config = _config()
        parent = _node(visits=3)
        child = _node(visits=0, prior=0.5, reward=7.0)
        # value_score is 0 for N_child = 0 whatever its reward;
        # pb_c = (ln((3 + 19652 + 1) / 19652) + 1.25) * sqrt(3) / 1 = 1.250203542 * 1.732050808 = 2.165416...
        expected = 0.5 * (math.log(19656 / 19652) + 1.25) * math.sqrt(3)
        assert ucb_score(config, parent, child, MinMaxStats(None)) == pytest.approx(expected)
        assert expected == pytest.approx(1.082708, abs=1e-6)


class TestSelectChild:
    def test_exact_ties_go_to_the_larger_action(self):
        config = _config()
        parent = _node(visits=0)
        # With N_parent = 0 every score is 0: the pseudocode's max over (score, action, child) picks action 2.
        parent.children = {0: _node(0, prior=0.2), 1: _node(0, prior=0.5), 2: _node(0, prior=0.3)}
        action, child = select_child(config, parent, MinMaxStats(None))
        assert action == 2 and child is parent.children[2]

    def test_highest_score_wins(self):
        config = _config()
        parent = _node(visits=1)
        parent.children = {0: _node(0, prior=0.2), 1: _node(0, prior=0.5), 2: _node(0, prior=0.3)}
        # Unvisited children: score = pb_c * prior with one pb_c for all: the largest prior (action 1) wins.
        assert select_child(config, parent, MinMaxStats(None))[0] == 1


class TestExpandNode:
    def test_priors_are_softmax_over_given_actions(self):
        node = Node(0)
        output = NetworkOutput(value=0.0, reward=0.5, policy_logits=np.log([1.0, 2.0, 5.0]), hidden_state=np.ones(3))
        expand_node(node, to_play=1, actions=[0, 2], network_output=output)
        # Only actions 0 and 2: exp(logits) = 1 and 5 -> priors 1/6 and 5/6.
        assert sorted(node.children) == [0, 2]
        assert node.children[0].prior == pytest.approx(1 / 6)
        assert node.children[2].prior == pytest.approx(5 / 6)
        assert node.to_play == 1 and node.reward == 0.5 and node.expanded()


class TestBackpropagate:
    def test_one_player_leaf_to_root_with_discount(self):
        root, child, leaf = _node(0, reward=0.0), _node(0, reward=1.0), _node(0, reward=0.5)
        stats = MinMaxStats(None)
        backpropagate([root, child, leaf], value=2.0, to_play=0, discount=0.9, min_max_stats=stats)
        # leaf: value_sum 2; then value = 0.5 + 0.9 * 2 = 2.3
        # child: value_sum 2.3; then value = 1.0 + 0.9 * 2.3 = 3.07
        # root: value_sum 3.07
        assert leaf.value_sum == pytest.approx(2.0)
        assert child.value_sum == pytest.approx(2.3)
        assert root.value_sum == pytest.approx(3.07)
        assert [n.visit_count for n in (root, child, leaf)] == [1, 1, 1]
        # MinMaxStats saw node.value() = 2, 2.3, 3.07.
        assert (stats.minimum, stats.maximum) == pytest.approx((2.0, 3.07))

    def test_two_players_value_sign_follows_to_play(self):
        root, child, leaf = _node(0, to_play=0), _node(0, to_play=1), _node(0, to_play=0)
        stats = MinMaxStats(KnownBounds(-1, 1))
        backpropagate([root, child, leaf], value=1.0, to_play=0, discount=1.0, min_max_stats=stats)
        # Rewards 0, discount 1: the value stays 1 up the path; nodes whose to_play is
        # player 0 add +1, the node of player 1 adds -1.
        assert (root.value_sum, child.value_sum, leaf.value_sum) == (1.0, -1.0, 1.0)
        backpropagate([root, child], value=0.5, to_play=1, discount=1.0, min_max_stats=stats)
        # Seen from player 1: child += 0.5, root (player 0) -= 0.5.
        assert (root.value_sum, child.value_sum) == (0.5, -0.5)
        assert root.visit_count == 2 and child.visit_count == 2


class _FakeDirichletRng:
    def __init__(self, noise):
        self.noise, self.alpha = np.asarray(noise), None

    def dirichlet(self, alpha):
        self.alpha = list(alpha)
        return self.noise


def test_add_exploration_noise_mixes_priors():
    config = _config(root_dirichlet_alpha=0.3, root_exploration_fraction=0.25)
    root = Node(0)
    root.children = {0: Node(0.5), 1: Node(0.5)}
    rng = _FakeDirichletRng([0.2, 0.8])
    add_exploration_noise(config, root, rng)
    # 0.5 * 0.75 + 0.2 * 0.25 = 0.425; 0.5 * 0.75 + 0.8 * 0.25 = 0.575
    assert rng.alpha == [0.3, 0.3]
    assert root.children[0].prior == pytest.approx(0.425)
    assert root.children[1].prior == pytest.approx(0.575)


class _FakeChoiceRng:
    def __init__(self, pick):
        self.pick, self.p = pick, None

    def choice(self, n, p):
        self.p = np.asarray(p)
        return self.pick


class TestSelectAction:
    def _root(self, visits):
        root = Node(0)
        root.children = {a: _node(n) for a, n in enumerate(visits)}
        return root

    def test_temperature_zero_is_argmax_with_ties_to_larger_action(self):
        root = self._root([3, 5, 5])
        assert select_action(_config(), 0, root, 0, np.random.default_rng(0), temperature=0.0) == 2

    def test_temperature_one_samples_proportional_to_visits(self):
        rng = _FakeChoiceRng(pick=1)
        action = select_action(_config(), 0, self._root([1, 3]), 0, rng, temperature=1.0)
        # N^(1/1): [1, 3] / 4
        assert action == 1
        np.testing.assert_allclose(rng.p, [0.25, 0.75])

    def test_temperature_half_squares_visits(self):
        rng = _FakeChoiceRng(pick=0)
        select_action(_config(), 0, self._root([1, 3]), 0, rng, temperature=0.5)
        # N^(1/0.5) = N^2: [1, 9] / 10
        np.testing.assert_allclose(rng.p, [0.1, 0.9])

    def test_schedule_from_config_by_training_steps(self):
        config = _config(
            visit_softmax_temperature=TemperatureSchedule(
                by="training_steps", schedule=((500_000, 1.0), (750_000, 0.5), (None, 0.25))
            )
        )
        # Atari: 1.0 below 500k steps, 0.5 below 750k, then 0.25.
        assert [config.visit_softmax_temperature_fn(0, s) for s in (0, 499_999, 500_000, 749_999, 750_000, 10**7)] == [
            1.0,
            1.0,
            0.5,
            0.5,
            0.25,
            0.25,
        ]
        rng = _FakeChoiceRng(pick=0)
        select_action(config, 0, self._root([1, 3]), 600_000, rng)
        np.testing.assert_allclose(rng.p, [0.1, 0.9])  # T = 0.5 at 600k steps

    def test_schedule_by_num_moves(self):
        config = _config(
            visit_softmax_temperature=TemperatureSchedule(by="num_moves", schedule=((30, 1.0), (None, 0.0)))
        )
        # Board games: T = 1 for the first 30 moves, then greedy.
        assert config.visit_softmax_temperature_fn(29, 10**6) == 1.0
        assert config.visit_softmax_temperature_fn(30, 0) == 0.0
        assert select_action(config, 30, self._root([2, 7, 1]), 0, np.random.default_rng(0)) == 1


class _TableNetwork:
    """A deterministic fake network: outputs depend on the action path only.

    hidden_state encodes nothing; each call returns the next row of a fixed table so
    the test can follow the search by hand.
    """

    def __init__(self, outputs):
        self.outputs = list(outputs)
        self.calls = []

    def recurrent_inference(self, hidden_state, action):
        self.calls.append(int(action[0]))
        value, reward, logits = self.outputs.pop(0)
        return NetworkOutput(
            value=np.array([value]),
            reward=np.array([reward]),
            policy_logits=np.array([logits], np.float64),
            hidden_state=np.zeros((1, 1)),
        )


def test_run_mcts_follows_the_pseudocode_by_hand():
    # Two actions, 3 simulations, discount 1, known bounds [0, 1] so normalize is fixed.
    config = _config(discount=1.0, num_simulations=3, known_bounds=KnownBounds(0.0, 1.0))
    root = Node(0)
    expand_node(root, 0, [0, 1], NetworkOutput(0.0, 0.0, np.log([0.6, 0.4]), np.zeros(1)))
    network = _TableNetwork(
        [
            (0.2, 0.0, [0.0, 0.0]),  # simulation 1
            (0.9, 0.0, [0.0, 0.0]),  # simulation 2
            (0.5, 0.0, [0.0, 0.0]),  # simulation 3
        ]
    )
    run_mcts(config, root, ActionHistory([], 2), network)
    # Sim 1: root N=0 -> all scores 0 -> tie -> larger action 1. Leaf value 0.2.
    #   child1: N=1, W=0.2; root: N=1, W=0.2.
    # Sim 2: root N=1. pb_c = ln((1+19652+1)/19652) + 1.25 = 1.250101760; sqrt(1) = 1.
    #   a0: 1.250101760 * 0.6 / 1 = 0.750061 ; a1: 1.250101760 * 0.4 / 2 + (0 + 1 * 0.2) = 0.450020
    #   -> action 0, leaf value 0.9. child0: N=1, W=0.9; root N=2, W=1.1.
    # Sim 3: root N=2: pb_c = (ln(19655/19652) + 1.25) * sqrt(2) = 1.250152640 * 1.414213562 = 1.767985
    #   a0: 1.767985 * 0.6 / 2 + 0.9 = 1.430396 ; a1: 1.767985 * 0.4 / 2 + 0.2 = 0.553597
    #   -> action 0 again; child0 is expanded, so descend to its child: both priors 0.5,
    #   child0 N=1 -> pb_c * 1 * 0.5 equal for both grandchildren -> tie -> action 1.
    assert network.calls == [1, 0, 1]
    assert root.children[0].visit_count == 2 and root.children[1].visit_count == 1
    # child0: W = 0.9 + 0.5 = 1.4; root: W = 0.2 + 0.9 + 0.5 = 1.6 over N = 3.
    assert root.children[0].value_sum == pytest.approx(1.4)
    assert root.value() == pytest.approx(1.6 / 3)


def test_count_root_evaluation_lets_the_prior_pick_the_first_simulation():
    # The tree above with search.count_root_evaluation, the root's network value 0.3, 2 simulations.
    config = _config(discount=1.0, num_simulations=2, known_bounds=KnownBounds(0.0, 1.0), count_root_evaluation=True)
    root = Node(0)
    expand_node(root, 0, [0, 1], NetworkOutput(0.3, 0.0, np.log([0.6, 0.4]), np.zeros(1)))
    network = _TableNetwork([(0.2, 0.0, [0.0, 0.0]), (0.9, 0.0, [0.0, 0.0])])
    run_mcts(config, root, ActionHistory([], 2), network)
    # Sim 1: root N=1 (its evaluation), pb_c = ln(19654/19652) + 1.25 = 1.250101766: a0
    #   1.250101766 * 0.6 = 0.750061, a1 1.250101766 * 0.4 = 0.500041 -> action 0 (the
    #   pseudocode's root, N=0, ties and takes 1). Leaf value 0.2: child0 N=1, W=0.2; root N=2, W=0.5.
    # Sim 2: root N=2, pb_c = (ln(19655/19652) + 1.25) * sqrt(2) = 1.767983: a0 1.767983 * 0.6 / 2
    #   + 0.2 = 0.730395, a1 1.767983 * 0.4 = 0.707193 -> action 0; child0 (N=1) has two
    #   children of prior 0.5 -> tie -> action 1.
    assert network.calls == [0, 1]
    assert root.children[0].visit_count == 2 and root.children[1].visit_count == 0
    # The root's value counts its evaluation: (0.3 + 0.2 + 0.9) / 3.
    assert root.visit_count == 3 and root.value() == pytest.approx(1.4 / 3)


@pytest.mark.parametrize(
    "rule, expected",
    [
        # root (player 0) -> child (player 1, reward 1.0 to its mover, player 0) -> leaf (player 0,
        # reward 0.5 to its mover, player 1); the leaf's value 0.2 is player 0's; discount 0.9.
        # negamax: leaf +0.2; value = -0.5 + 0.9 * 0.2 = -0.32 (player 0's view: player 1's reward
        # counts against); child (player 1) adds 0.32 = 0.5 - 0.9 * 0.2; value = 1.0 + 0.9 * -0.32
        # = 0.712; root (player 0) adds 0.712 = 1.0 - 0.9 * 0.32.
        ("negamax", (0.712, 0.32, 0.2)),
        # pseudocode: value = 0.5 + 0.9 * 0.2 = 0.68, child adds -0.68; value = 1.0 + 0.9 * 0.68 = 1.612.
        ("pseudocode", (1.612, -0.68, 0.2)),
    ],
)
def test_two_player_backup_rules_differ_on_a_hand_worked_tree(rule, expected):
    root, child, leaf = Node(0), Node(0), Node(0)
    root.to_play, child.to_play, leaf.to_play = 0, 1, 0
    child.reward, leaf.reward = 1.0, 0.5
    backpropagate(
        [root, child, leaf], value=0.2, to_play=0, discount=0.9, min_max_stats=MinMaxStats(None), two_player_rule=rule
    )
    assert (root.value_sum, child.value_sum, leaf.value_sum) == pytest.approx(expected)
    # The root's player sees the child (player 1's value 0.32) as -0.32 under negamax.
    config = MuZeroConfig(search=SearchConfig(two_player_rule=rule))
    seen = value_for_parent(config, root.to_play, child)
    assert seen == pytest.approx(-0.32 if rule == "negamax" else -0.68)
