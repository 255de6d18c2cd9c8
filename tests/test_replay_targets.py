"""Tests for muzero/replay/targets.py: `make_batch_vectorized` against `make_target`, and `Batch`."""

from __future__ import annotations

import numpy as np
import pytest

from muzero.config import ReplayConfig
from muzero.replay import FlatGames, make_batch, make_batch_vectorized
from tests.test_replay import line_game, random_game, replay_buffer


@pytest.mark.parametrize("two_players", [False, True], ids=["one_player", "two_players"])
@pytest.mark.parametrize("num_unroll_steps, td_steps", [(5, 10), (3, 1), (5, 50)])
def test_vectorized_batch_equals_make_target(num_unroll_steps, td_steps, two_players):
    rng = np.random.default_rng(2)
    games = [random_game(rng, length) for length in (1, 2, 7, 30, 64)]
    if two_players:  # players alternate, from either one; a game can start with player 1
        for game in games:
            first = int(rng.integers(2))
            game.num_players, game.players = 2, [(first + i) % 2 for i in range(len(game) + 1)]
    games[2].bootstrap_value, games[4].bootstrap_value = 3.5, -1.25  # cut by a time limit
    flat = FlatGames(games, 3, td_steps, 0.97)
    # Every position of every game, so the ends of games (padding, absorbing states,
    # bootstraps past the end) are all covered.
    pairs = [(g, i) for g in range(len(games)) for i in range(len(games[g]))]
    game_index = np.array([g for g, _ in pairs])
    positions = np.array([i for _, i in pairs])
    padding = rng.integers(3, size=(len(pairs), num_unroll_steps))
    expected = make_batch([(games[g], i) for g, i in pairs], padding, num_unroll_steps, td_steps)
    got = make_batch_vectorized(flat, game_index, positions, padding, num_unroll_steps, td_steps, 0.97)
    for name in ("observation", "actions", "target_reward", "target_policy", "policy_mask"):
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name), err_msg=name)
    # Same sum in another order: equal to float32 rounding.
    np.testing.assert_allclose(got.target_value, expected.target_value, rtol=1e-6, atol=1e-6)


def test_sample_batch_pads_actions_and_masks_absorbing_policy():
    buffer = replay_buffer(batch_size=32)
    buffer.save_game(line_game(2))
    batch = buffer.sample_batch(num_unroll_steps=3, td_steps=1)
    assert batch.observation.shape == (32, 2) and batch.actions.shape == (32, 3)
    assert batch.target_value.shape == batch.target_reward.shape == batch.policy_mask.shape == (32, 4)
    assert batch.target_policy.shape == (32, 4, 2)
    for row in range(32):
        i = int(batch.observation[row, 0])  # the observation encodes its position
        assert i in (0, 1)
        # Real actions first (history = [0, 1]), then random padding in {0, 1}.
        np.testing.assert_array_equal(batch.actions[row, : 2 - i], [0, 1][i:])
        assert set(batch.actions[row, 2 - i :]) <= {0, 1}
        # Policy targets exist for positions i..1 only: 2 - i of them.
        np.testing.assert_array_equal(batch.policy_mask[row], [1.0] * (2 - i) + [0.0] * (2 + i))
        np.testing.assert_array_equal(batch.target_policy[row, 2 - i :], 0.0)
    # Position 0 of a 2-move game, td 1, discount 1: values [1 + root_values[1] = 2, 1 (past end), 0, 0]
    rows = np.where(batch.observation[:, 0] == 0)[0]
    np.testing.assert_allclose(batch.target_value[rows[0]], [2.0, 1.0, 0.0, 0.0])
    np.testing.assert_allclose(batch.target_reward[rows[0]], [0.0, 1.0, 1.0, 0.0])


def test_consistency_batches_carry_the_observations_along_the_unroll():
    buffer = replay_buffer(batch_size=32, with_unroll_observations=True)
    buffer.save_game(line_game(2))
    batch = buffer.sample_batch(num_unroll_steps=3, td_steps=1)
    assert batch.unroll_observation.shape == (32, 3, 2) and batch.unroll_mask.shape == (32, 3)
    seen = set()
    for row in range(32):
        i = int(batch.observation[row, 0])  # the observation encodes its position
        seen.add(i)
        # Observations i + 1, i + 2, i + 3 of a 2-move game (3 states: 0, 1, 2), clipped to
        # the last state 2; the mask keeps the states up to and including the final one:
        # from 0: states 1, 2, (2) with mask 1, 1, 0; from 1: 2, (2), (2) with mask 1, 0, 0.
        np.testing.assert_array_equal(batch.unroll_observation[row, :, 0], [min(i + k, 2) for k in (1, 2, 3)])
        np.testing.assert_array_equal(batch.unroll_mask[row], [1.0 if i + k <= 2 else 0.0 for k in (1, 2, 3)])
    assert seen == {0, 1}
    # Off (the default): no unroll observations, and the same positions drawn.
    plain = replay_buffer(batch_size=32)
    plain.save_game(line_game(2))
    plain_batch = plain.sample_batch(num_unroll_steps=3, td_steps=1)
    assert plain_batch.unroll_observation is None and plain_batch.unroll_mask is None
    np.testing.assert_array_equal(plain_batch.observation, batch.observation)


def test_batch_take_cuts_every_field_alike():
    buffer = replay_buffer(batch_size=6)
    buffer.save_game(line_game(3))
    batch = buffer.sample_batch(num_unroll_steps=2, td_steps=1)
    part = batch.take([4, 1])
    # Rows 4 and 1 of each present field, in that order; the absent ones stay None.
    for name in ("observation", "actions", "target_value", "target_reward", "target_policy", "policy_mask"):
        np.testing.assert_array_equal(getattr(part, name), getattr(batch, name)[[4, 1]])
    assert part.importance_weight is None and part.unroll_observation is None
    part.observation[0, 0] = -99.0  # a copy: the batch is untouched
    assert batch.observation[4, 0] != -99.0


def test_vectorized_batch_equals_make_target_with_a_horizon_per_row():
    # The off-policy correction gives each sample its own n: the same targets as make_target
    # called with each row's n.
    rng = np.random.default_rng(3)
    games = [random_game(rng, length) for length in (1, 2, 7, 30, 64)]
    games[4].bootstrap_value = -1.25
    flat = FlatGames(games, 3, 10, 0.97)
    pairs = [(g, i) for g in range(len(games)) for i in range(len(games[g]))]
    game_index = np.array([g for g, _ in pairs])
    positions = np.array([i for _, i in pairs])
    horizons = rng.integers(1, 11, size=(len(pairs), 1))
    padding = rng.integers(3, size=(len(pairs), 5))
    expected = make_batch([(games[g], i) for g, i in pairs], padding, 5, horizons[:, 0])
    got = make_batch_vectorized(flat, game_index, positions, padding, 5, horizons, 0.97)
    np.testing.assert_allclose(got.target_value, expected.target_value, rtol=1e-6, atol=1e-6)
    assert len(np.unique(horizons)) == 10


def test_off_policy_correction_shortens_the_horizon_of_old_games():
    # Two 10-move games, rewards 1, discount 1, root values 0: a value target counts one per
    # reward inside its horizon, min(n, 10 - i) at position i. Game A arrives at step 0, game B
    # at step 100; with a correction every 40 steps A's age of 100 takes 100 // 40 = 2 steps off
    # n = 5 (n = 3), and B (age 0) keeps n = 5.
    buffer = replay_buffer(
        batch_size=200, td_steps=5, replay=ReplayConfig(window_size=10, off_policy_correction_steps=40)
    )
    for start, step in ((0.0, 0), (100.0, 100)):
        game = line_game(10, start)
        game.root_values = [0.0] * 10
        buffer.save_game(game, training_step=step)
    batch = buffer.sample_batch(num_unroll_steps=0, td_steps=5)
    old = batch.observation[:, 0] < 100
    position = batch.observation[:, 0] - np.where(old, 0, 100)
    expected = np.minimum(np.where(old, 3, 5), 10 - position)
    np.testing.assert_array_equal(batch.target_value[:, 0], expected)
    assert old.any() and (~old).any()
