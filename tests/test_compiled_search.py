"""muzero/compiled_search.py gives exactly the reference search's root visit counts.

The network here is a lookup table: hidden states are integer ids, dynamics is integer
arithmetic and values, rewards and logits are table entries, so numpy and TensorFlow
(with or without XLA) compute bit-identical network outputs and any difference would
come from the search itself.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from muzero.config import GameConfig, KnownBounds, MuZeroConfig, SearchConfig
from muzero.networks.base import Network, NetworkOutput
from muzero.search.compiled import CompiledSearch
from tests.test_batched_search import reference_visits

P = 1009  # number of distinct hidden states


class TableNetwork(Network):
    """id' = (31 id + 7 a + 1) mod P; value, reward, logits = tables[id']."""

    def __init__(self, rng: np.random.Generator | None, actions: int, reward_scale: float, tables=None):
        """Random tables from `rng`, or the given (values [P], rewards [P], logits [P, A])."""
        if tables is None:
            tables = (
                rng.normal(size=P).astype(np.float32),
                (rng.normal(size=P) * reward_scale).astype(np.float32),
                rng.normal(size=(P, actions)).astype(np.float32),
            )
        self.values, self.rewards, self.logits = tables

    def initial_inference(self, ids) -> NetworkOutput:
        ids = np.asarray(ids, np.int64)
        return NetworkOutput(
            self.values[ids], np.zeros(len(ids), np.float32), self.logits[ids], ids[:, None].astype(np.float32)
        )

    def recurrent_inference(self, hidden_state, action) -> NetworkOutput:
        ids = (np.asarray(hidden_state)[:, 0].astype(np.int64) * 31 + np.asarray(action) * 7 + 1) % P
        return NetworkOutput(self.values[ids], self.rewards[ids], self.logits[ids], ids[:, None].astype(np.float32))

    def tf_recurrent(self, hidden_state, action):
        ids = (tf.cast(hidden_state[:, 0], tf.int32) * 31 + action * 7 + 1) % P
        next_state = tf.cast(ids, tf.float32)[:, None]
        return (tf.gather(self.values, ids), tf.gather(self.rewards, ids), tf.gather(self.logits, ids), next_state)

    def training_steps(self) -> int:
        return 0


SETTINGS = {
    "one_player": {
        "actions": 2,
        "discount": 0.997,
        "players": 1,
        "bounds": None,
        "mask": False,
        "ucb_value": "pseudocode",
        "reward_scale": 0.3,
    },
    "normalized_q": {
        "actions": 3,
        "discount": 0.99,
        "players": 1,
        "bounds": None,
        "mask": False,
        "ucb_value": "normalized_q",
        "reward_scale": 0.3,
    },
    "two_players": {
        "actions": 4,
        "discount": 1.0,
        "players": 2,
        "bounds": KnownBounds(-1.0, 1.0),
        "mask": False,
        "ucb_value": "pseudocode",
        "reward_scale": 0.0,
        "rule": "pseudocode",
    },
    # Two players with rewards and discount: where the negamax and pseudocode rules differ.
    "two_players_rewards": {
        "actions": 3,
        "discount": 0.9,
        "players": 2,
        "bounds": None,
        "mask": False,
        "ucb_value": "pseudocode",
        "reward_scale": 0.3,
    },
    "two_players_normalized_q": {
        "actions": 3,
        "discount": 0.9,
        "players": 2,
        "bounds": None,
        "mask": False,
        "ucb_value": "normalized_q",
        "reward_scale": 0.3,
    },
    "two_players_pseudocode_rule": {
        "actions": 3,
        "discount": 0.9,
        "players": 2,
        "bounds": None,
        "mask": False,
        "ucb_value": "pseudocode",
        "reward_scale": 0.3,
        "rule": "pseudocode",
    },
    "masked_root": {
        "actions": 5,
        "discount": 0.95,
        "players": 1,
        "bounds": None,
        "mask": True,
        "ucb_value": "pseudocode",
        "reward_scale": 0.3,
    },
}
# Larger than most trees' ranges, so that it changes the divisor (search.min_value_range): the reference's
# visits then differ in 12 of the 100 searches below.
SETTINGS["min_value_range"] = {**SETTINGS["normalized_q"], "min_value_range": 1.0}
# The root's network value as its first visit (search.count_root_evaluation).
SETTINGS["count_root_evaluation"] = {**SETTINGS["normalized_q"], "count_root": True}
SETTINGS["two_players_count_root_evaluation"] = {**SETTINGS["two_players_rewards"], "count_root": True}


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
@pytest.mark.parametrize("name", list(SETTINGS))
def test_compiled_equals_reference(name, jit_compile):
    s = SETTINGS[name]
    rng = np.random.default_rng(11)
    config = MuZeroConfig(
        game=GameConfig(action_space_size=s["actions"], discount=s["discount"]),
        search=SearchConfig(
            num_simulations=25,
            known_bounds=s["bounds"],
            ucb_value=s["ucb_value"],
            two_player_rule=s.get("rule", "negamax"),
            min_value_range=s.get("min_value_range", 0.0),
            count_root_evaluation=s.get("count_root", False),
        ),
    )
    network = TableNetwork(rng, s["actions"], s["reward_scale"])
    root_output = network.initial_inference(rng.integers(P, size=100))
    legal = np.ones((100, s["actions"]), bool)
    if s["mask"]:
        legal = rng.random(legal.shape) < 0.6
        legal[np.arange(100), rng.integers(s["actions"], size=100)] = True
    to_play = rng.integers(s["players"], size=100)

    expected, values = reference_visits(config, network, root_output, legal, to_play, s["players"], with_values=True)
    search = CompiledSearch(
        config.search,
        config.discount,
        config.action_space_size,
        network.tf_recurrent,
        (1,),
        jit_compile=jit_compile,
        num_players=s["players"],
    )
    result = search(
        root_output.hidden_state,
        root_output.policy_logits,
        root_output.reward,
        legal,
        to_play,
        root_value=root_output.value,
    )
    np.testing.assert_array_equal(result.visit_counts, expected)
    # The root values too (with search.count_root_evaluation, the network's value is one of the
    # averaged; the compiled search takes it as float32, so equal to float32's precision).
    np.testing.assert_allclose(result.root_value, values, rtol=1e-6, atol=1e-6)
    assert len({tuple(v) for v in expected}) >= 4
    if s.get("count_root"):  # without the roots' values it refuses, rather than count zeros
        with pytest.raises(ValueError, match="count_root_evaluation"):
            search(root_output.hidden_state, root_output.policy_logits, root_output.reward, legal, to_play)
