"""muzero/batched_search.py gives exactly the reference search's root visit counts."""

from __future__ import annotations

import numpy as np
import pytest

from muzero.config import GameConfig, KnownBounds, MuZeroConfig, SearchConfig
from muzero.networks.base import NetworkOutput
from muzero.networks.numpy_mlp import NumpyMLPNetwork
from muzero.search.batched import run_batched_mcts
from muzero.search.reference import ActionHistory, Node, expand_node, run_mcts

NUM_STATES = 100


def random_network(
    rng: np.random.Generator, obs: int, actions: int, hidden: int, width: int, support: int
) -> NumpyMLPNetwork:
    """An MLP with random weights in the layout of muzero.models.MLPNetwork."""
    bins = 2 * support + 1 if support else 1

    def layer(n_in, n_out, scale=1.0):
        return (rng.normal(size=(n_in, n_out)) * scale / np.sqrt(n_in), rng.normal(size=n_out) * 0.3)

    weights = {
        "representation": {"hidden_0": layer(obs, width), "state": layer(width, hidden)},
        "dynamics": {
            "hidden_0": layer(hidden + actions, width),
            "state": layer(width, hidden),
            "reward": layer(width, bins, 0.2),
        },
        "prediction": {
            "hidden_0": layer(hidden, width),
            "policy": layer(width, actions, 0.3),
            "value": layer(width, bins, 1.0),
        },
    }
    return NumpyMLPNetwork(weights, actions, support, "elu")


class RowwiseNetwork:
    """Evaluates a batch row by row, so a row's output does not depend on the batch it is in
    (BLAS may pick other kernels, hence other rounding, for other batch sizes)."""

    def __init__(self, network: NumpyMLPNetwork):
        self.network = network

    def initial_inference(self, observation) -> NetworkOutput:
        return self._stack([self.network.initial_inference(o[None]) for o in observation])

    def recurrent_inference(self, hidden_state, action) -> NetworkOutput:
        return self._stack(
            [self.network.recurrent_inference(h[None], np.array([a])) for h, a in zip(hidden_state, action)]
        )

    @staticmethod
    def _stack(outputs) -> NetworkOutput:
        return NetworkOutput(
            *(
                np.concatenate([getattr(o, f) for o in outputs])
                for f in ("value", "reward", "policy_logits", "hidden_state")
            )
        )

    def training_steps(self) -> int:
        return 0


def reference_visits(config, network, root_output, legal, to_play, num_players, with_values=False):
    """The reference search's root visit counts [B, A]; with `with_values`, also its root values [B]."""
    visits, values = np.zeros(legal.shape, np.int64), np.zeros(len(legal))
    for i in range(len(legal)):
        root = Node(0)
        actions = [a for a in range(legal.shape[1]) if legal[i, a]]
        expand_node(root, int(to_play[i]), actions, root_output.item(i))
        run_mcts(config, root, ActionHistory([], legal.shape[1], int(to_play[i]), num_players), network)
        for a, child in root.children.items():
            visits[i, a] = child.visit_count
        values[i] = root.value()
    return (visits, values) if with_values else visits


SETTINGS = {
    # One player, discount and predicted rewards (categorical support), CartPole-like.
    "one_player": {
        "actions": 2,
        "discount": 0.997,
        "support": 5,
        "players": 1,
        "bounds": None,
        "mask": False,
        "ucb_value": "pseudocode",
    },
    "one_player_normalized_q": {
        "actions": 3,
        "discount": 0.99,
        "support": 5,
        "players": 1,
        "bounds": None,
        "mask": False,
        "ucb_value": "normalized_q",
    },
    # Two players alternating to_play, known bounds, discount 1, scalar values (the pseudocode's rule).
    "two_players": {
        "actions": 4,
        "discount": 1.0,
        "support": 0,
        "players": 2,
        "bounds": KnownBounds(-1.0, 1.0),
        "mask": False,
        "ucb_value": "pseudocode",
        "rule": "pseudocode",
    },
    # Two players with predicted rewards and discount: where the negamax and pseudocode rules differ.
    "two_players_rewards": {
        "actions": 3,
        "discount": 0.9,
        "support": 5,
        "players": 2,
        "bounds": None,
        "mask": False,
        "ucb_value": "pseudocode",
    },
    "two_players_normalized_q": {
        "actions": 3,
        "discount": 0.9,
        "support": 5,
        "players": 2,
        "bounds": None,
        "mask": False,
        "ucb_value": "normalized_q",
    },
    "two_players_pseudocode_rule": {
        "actions": 3,
        "discount": 0.9,
        "support": 5,
        "players": 2,
        "bounds": None,
        "mask": False,
        "ucb_value": "pseudocode",
        "rule": "pseudocode",
    },
    # Illegal actions masked at the root.
    "masked_root": {
        "actions": 5,
        "discount": 0.95,
        "support": 3,
        "players": 1,
        "bounds": None,
        "mask": True,
        "ucb_value": "pseudocode",
    },
}
# Larger than most trees' ranges, so that it changes the divisor (search.min_value_range).
SETTINGS["one_player_min_value_range"] = {**SETTINGS["one_player_normalized_q"], "min_value_range": 1.0}
# The root's network value as its first visit (search.count_root_evaluation), in both searches: the
# reference's visits then differ from the pseudocode root's in 42 and 41 of the 100 searches below.
SETTINGS["one_player_count_root_evaluation"] = {**SETTINGS["one_player"], "count_root": True}
SETTINGS["two_players_count_root_evaluation"] = {**SETTINGS["two_players_normalized_q"], "count_root": True}


@pytest.mark.parametrize("name", list(SETTINGS))
def test_batched_equals_reference(name):
    s = SETTINGS[name]
    rng = np.random.default_rng(7)
    config = MuZeroConfig(
        game=GameConfig(action_space_size=s["actions"], discount=s["discount"]),
        search=SearchConfig(
            num_simulations=30,
            known_bounds=s["bounds"],
            ucb_value=s["ucb_value"],
            two_player_rule=s.get("rule", "negamax"),
            min_value_range=s.get("min_value_range", 0.0),
            count_root_evaluation=s.get("count_root", False),
        ),
    )
    network = RowwiseNetwork(random_network(rng, obs=4, actions=s["actions"], hidden=6, width=16, support=s["support"]))
    observations = rng.normal(size=(NUM_STATES, 4)) * 3
    root_output = network.initial_inference(observations)
    legal = np.ones((NUM_STATES, s["actions"]), bool)
    if s["mask"]:
        legal = rng.random(legal.shape) < 0.6
        legal[np.arange(NUM_STATES), rng.integers(s["actions"], size=NUM_STATES)] = True  # at least one
    to_play = rng.integers(s["players"], size=NUM_STATES)

    expected = reference_visits(config, network, root_output, legal, to_play, s["players"])
    result = run_batched_mcts(
        config.search, config.discount, root_output, network, legal, to_play, num_players=s["players"]
    )
    np.testing.assert_array_equal(result.visit_counts, expected)
    # Every simulation lands under the root: visits sum to num_simulations, none on illegal actions.
    assert (result.visit_counts.sum(axis=1) == 30).all() and not result.visit_counts[~legal].any()
    # The searches are not trivial: visits differ between states.
    assert len({tuple(v) for v in expected}) >= 4


@pytest.mark.parametrize("count_root", [False, True])
def test_root_value_and_noise_match_the_reference(count_root):
    rng = np.random.default_rng(3)
    config = MuZeroConfig(
        game=GameConfig(action_space_size=3, discount=0.9),
        search=SearchConfig(num_simulations=20, count_root_evaluation=count_root),
    )
    network = RowwiseNetwork(random_network(rng, 4, 3, 5, 8, support=2))
    root_output = network.initial_inference(rng.normal(size=(10, 4)))
    noise = rng.dirichlet([0.25] * 3, size=10)
    result = run_batched_mcts(config.search, config.discount, root_output, network, np.ones((10, 3), bool), noise=noise)
    for i in range(10):
        root = Node(0)
        expand_node(root, 0, [0, 1, 2], root_output.item(i))
        for a in range(3):  # add_exploration_noise with these samples
            root.children[a].prior = root.children[a].prior * 0.75 + noise[i, a] * 0.25
        run_mcts(config, root, ActionHistory([], 3), network)
        assert [root.children[a].visit_count for a in range(3)] == result.visit_counts[i].tolist()
        assert result.root_value[i] == pytest.approx(root.value(), rel=1e-12)
