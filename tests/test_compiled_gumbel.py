"""muzero/search/compiled_gumbel.py gives the reference Gumbel search's visits, action and policy.

On the tables, roots and Gumbel noise of tests/data/gumbel_mctx.npz (where the reference
equals mctx, tests/test_gumbel.py), in graph mode and with XLA, with the noise and without
it (evaluation).
"""

from __future__ import annotations

import numpy as np
import pytest

from muzero.search.compiled_gumbel import CompiledGumbelSearch
from tests.test_compiled_search import TableNetwork
from tests.test_gumbel import SETTINGS, load_setting, reference_gumbel, setting_config

# Larger than most nodes' spans of completed Q, so that it changes the divisor (search.min_value_range); the
# test checks that it changes the reference's policies, then that the compiled search follows.
FLOORED = [(name, 0.0) for name in SETTINGS] + [("one_player", 1.0), ("two_players", 1.0)]


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
@pytest.mark.parametrize("name,min_value_range", FLOORED)
def test_compiled_gumbel_equals_reference(name, min_value_range, jit_compile):
    d = load_setting(name)
    config = setting_config(d, min_value_range)
    network = TableNetwork(None, 0, 0.0, (d["values"], d["rewards"], d["logits"]))
    root_output = network.initial_inference(d["root_ids"])
    players = int(d["setting_players"])
    if min_value_range:
        unfloored = reference_gumbel(
            setting_config(d), network, root_output, d["legal"], d["to_play"], d["gumbel"], players
        )
        floored = reference_gumbel(config, network, root_output, d["legal"], d["to_play"], d["gumbel"], players)
        assert np.abs(floored[2] - unfloored[2]).max() > 1e-3
    search = CompiledGumbelSearch(
        config.search,
        config.discount,
        config.action_space_size,
        network.tf_recurrent,
        (1,),
        jit_compile=jit_compile,
        num_players=players,
    )
    for gumbel in (d["gumbel"], np.zeros_like(d["gumbel"])):  # self-play, then evaluation
        visits, actions, policies = reference_gumbel(
            config, network, root_output, d["legal"], d["to_play"], gumbel, players
        )
        result = search(
            root_output.hidden_state,
            root_output.policy_logits,
            root_output.reward,
            d["legal"],
            d["to_play"],
            gumbel,
            root_value=root_output.value,
        )
        np.testing.assert_array_equal(result.visit_counts, visits)
        np.testing.assert_array_equal(result.action, actions)
        np.testing.assert_allclose(result.policy, policies, rtol=1e-12, atol=1e-15)
