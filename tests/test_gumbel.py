"""muzero/search/gumbel.py: Gumbel MuZero's reference search, by hand and against DeepMind's mctx.

The mctx outputs are stored in tests/data/gumbel_mctx.npz by scripts/mctx_gumbel_oracle.py
(`mctx.gumbel_muzero_policy` in float64 on table networks, 64 roots per setting); the test
runs the reference search on the same tables, roots and Gumbel noise.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from muzero.config import GameConfig, MuZeroConfig, SearchConfig
from muzero.networks.base import NetworkOutput
from muzero.search.gumbel import (
    considered_visits,
    gumbel_search_roots,
    improved_policy,
    mixed_value,
    score_considered,
    sigma_completed_q,
)
from muzero.search.reference import Node
from tests.test_compiled_search import TableNetwork

ROOT = Path(__file__).resolve().parents[1]
ORACLE = ROOT / "tests" / "data" / "gumbel_mctx.npz"
SETTINGS = ["one_player", "two_players", "two_players_board", "masked_root", "two_simulations"]


def load_setting(name: str) -> dict:
    with np.load(ORACLE) as data:
        return {key.split("/", 1)[1]: data[key] for key in data.files if key.startswith(name + "/")}


def setting_config(d: dict, min_value_range: float = 0.0) -> MuZeroConfig:
    return MuZeroConfig(
        game=GameConfig(action_space_size=int(d["setting_actions"]), discount=float(d["setting_discount"])),
        search=SearchConfig(
            algorithm="gumbel",
            num_simulations=int(d["setting_simulations"]),
            max_considered_actions=int(d["setting_considered"]),
            min_value_range=min_value_range,
        ),
    )


def reference_gumbel(config: MuZeroConfig, network, root_output: NetworkOutput, legal, to_play, gumbel, players):
    """`run_gumbel_mcts` on each root: (visit counts [B, A], actions [B], policies [B, A])."""
    result = gumbel_search_roots(config.search, config.discount, root_output, network, legal, to_play, gumbel, players)
    return result.visit_counts, result.action, result.policy


@pytest.mark.parametrize("name", SETTINGS)
def test_reference_equals_mctx(name):
    d = load_setting(name)
    config = setting_config(d)
    network = TableNetwork(None, 0, 0.0, (d["values"], d["rewards"], d["logits"]))
    root_output = network.initial_inference(d["root_ids"])
    players = int(d["setting_players"])
    visits, actions, policies = reference_gumbel(
        config, network, root_output, d["legal"], d["to_play"], d["gumbel"], players
    )
    np.testing.assert_array_equal(visits, d["visit_counts"])
    np.testing.assert_array_equal(actions, d["action"])
    np.testing.assert_allclose(policies, d["policy"], rtol=1e-9, atol=1e-12)


@pytest.mark.skipif(importlib.util.find_spec("mctx") is None, reason="mctx not installed (pip install -e '.[bench]')")
def test_stored_oracle_is_what_mctx_gives(tmp_path):
    out = tmp_path / "oracle.npz"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "mctx_gumbel_oracle.py"), "--out", str(out)], check=True)
    with np.load(out) as fresh, np.load(ORACLE) as stored:
        assert sorted(fresh.files) == sorted(stored.files)
        for key in stored.files:
            np.testing.assert_allclose(fresh[key], stored[key], rtol=1e-12, err_msg=key)


def test_considered_visits_by_hand():
    # 4 actions, 8 simulations: ceil(log2 4) = 2 rounds; 8 // (2 * 4) = 1 visit for each of 4,
    # then 8 // (2 * 2) = 2 visits for each of the best 2.
    assert considered_visits(4, 8) == [0, 0, 0, 0, 1, 1, 2, 2]
    # 2 actions, 5 simulations: 1 round of 5 // 2 = 2 visits each, then again, cut at 5.
    assert considered_visits(2, 5) == [0, 0, 1, 1, 2]
    # One action: it takes every simulation.
    assert considered_visits(1, 3) == [0, 1, 2]
    # 16 actions, 50 simulations: 4 rounds; 16 actions once (50 // 64 -> at least 1), 8 once
    # (50 // 32), 4 three times (50 // 16): 16 + 8 + 12 = 36; then 2 actions 6 times (50 // 8).
    schedule = considered_visits(16, 50)
    assert schedule[:16] == [0] * 16 and schedule[16:24] == [1] * 8
    assert schedule[24:36] == [2] * 4 + [3] * 4 + [4] * 4
    assert schedule[36:38] == [5, 5] and schedule[48:50] == [11, 11] and len(schedule) == 50


def test_mixed_value_by_hand():
    # Visited: actions 0 (2 visits, Q 0.3, prior 0.5) and 2 (1 visit, Q -0.6, prior 0.2).
    # Weighted Q = (0.5 * 0.3 + 0.2 * -0.6) / 0.7 = 0.03 / 0.7; mixed = (0.5 + 3 * 0.03 / 0.7) / 4.
    value = mixed_value(0.5, np.array([2.0, 0.0, 1.0]), np.array([0.3, 9.0, -0.6]), np.array([0.5, 0.3, 0.2]))
    assert value == pytest.approx((0.5 + 3 * 0.03 / 0.7) / 4)


def _node(to_play, children, raw_value):
    """An expanded node: children {action: (prior, visits, value_sum, reward, to_play)}."""
    node = Node(0)
    node.to_play, node.raw_value = to_play, raw_value
    for action, (prior, visits, value_sum, reward, child_to_play) in children.items():
        child = Node(prior)
        child.visit_count, child.value_sum, child.reward, child.to_play = visits, value_sum, reward, child_to_play
        node.children[action] = child
    return node


def test_sigma_completed_q_by_hand():
    config = MuZeroConfig(game=GameConfig(action_space_size=3, discount=0.9), search=SearchConfig(algorithm="gumbel"))
    # Q0 = 0.1 + 0.9 * (1.0 / 2) = 0.55; action 1 unvisited; Q2 = 0 + 0.9 * -1 = -0.9.
    node = _node(0, {0: (0.5, 2, 1.0, 0.1, 0), 1: (0.3, 0, 0.0, 0.0, 0), 2: (0.2, 1, -1.0, 0.0, 0)}, 0.2)
    # Mixed value = (0.2 + 3 * (0.5 * 0.55 + 0.2 * -0.9) / 0.7) / 4; completed = [0.55, mixed, -0.9],
    # min-max normalised over 1.45, scaled by (50 + 2) * 0.1 = 5.2.
    mixed = (0.2 + 3 * (0.5 * 0.55 - 0.2 * 0.9) / 0.7) / 4
    expected = 5.2 * (np.array([0.55, mixed, -0.9]) + 0.9) / 1.45
    np.testing.assert_allclose(sigma_completed_q(config, node, 3), expected, rtol=1e-12)


def test_sigma_completed_q_min_value_range_is_the_smallest_divisor():
    def config(min_value_range):
        search = SearchConfig(algorithm="gumbel", min_value_range=min_value_range)
        return MuZeroConfig(game=GameConfig(action_space_size=3, discount=0.9), search=search)

    node = _node(0, {0: (0.5, 2, 1.0, 0.1, 0), 1: (0.3, 0, 0.0, 0.0, 0), 2: (0.2, 1, -1.0, 0.0, 0)}, 0.2)
    # The node of the test above: its completed Qs span 1.45 < 2, so they are divided by 2, not
    # stretched over [0, 1]: the best action gets 5.2 * 1.45 / 2, not 5.2.
    mixed = (0.2 + 3 * (0.5 * 0.55 - 0.2 * 0.9) / 0.7) / 4
    expected = 5.2 * (np.array([0.55, mixed, -0.9]) + 0.9) / 2.0
    np.testing.assert_allclose(sigma_completed_q(config(2.0), node, 3), expected, rtol=1e-12)
    # A floor below the span changes nothing: 1.45 is divided by, as without the floor.
    np.testing.assert_allclose(sigma_completed_q(config(1.0), node, 3), expected * 2.0 / 1.45, rtol=1e-12)


def test_sigma_completed_q_two_players_negates_the_other_players_value():
    config = MuZeroConfig(game=GameConfig(action_space_size=2, discount=1.0), search=SearchConfig(algorithm="gumbel"))
    # Player 0 to move; both children are player 1's, values 0.5 and -0.25 for player 1, so
    # Q = -0.5 and 0.25 for player 0: action 1 is the better one, normalised to 1.
    node = _node(0, {0: (0.5, 1, 0.5, 0.0, 1), 1: (0.5, 1, -0.25, 0.0, 1)}, 0.0)
    np.testing.assert_allclose(sigma_completed_q(config, node, 2), [0.0, 5.1], rtol=1e-12)  # (50 + 1) * 0.1


def test_score_considered_by_hand():
    # Considered visit 1: action 1 (0 visits) is out, action 2 is illegal. Action 0:
    # g + (logit - max legal logit) + sigma = 0.1 + (1 - 2) + 0.5 = -0.4.
    score = score_considered(
        1,
        np.array([0.1, 5.0, 0.0]),
        np.array([1.0, 2.0, -np.inf]),
        np.full(3, 0.5),
        np.array([1.0, 0.0, 1.0]),
        np.array([True, True, False]),
    )
    np.testing.assert_allclose(score, [-0.4, -np.inf, -np.inf])


def test_improved_policy_by_hand():
    # softmax([0 + ln 3, ln 2 + 0]) over the legal actions = [3/5, 2/5]; illegal: 0.
    policy = improved_policy(
        np.array([0.0, np.log(2), -np.inf]), np.array([np.log(3), 0.0, 7.0]), np.array([1, 1, 0], bool)
    )
    np.testing.assert_allclose(policy, [0.6, 0.4, 0.0], rtol=1e-12)
