"""Tests for muzero/replay.py."""

from __future__ import annotations

import numpy as np
import pytest

from muzero.config import GameConfig, MuZeroConfig, ReplayConfig, TrainConfig
from muzero.game import Game
from muzero.replay import FlatGames, ReplayBuffer, make_batch, make_batch_vectorized


def _game(length: int, start: float = 0.0) -> Game:
    game = Game(action_space_size=2, discount=1.0)
    game.observations = [np.array([start + i, 0.0], np.float32) for i in range(length + 1)]
    game.history = [i % 2 for i in range(length)]
    game.rewards = [1.0] * length
    game.root_values = [float(length - i) for i in range(length)]
    game.child_visits = [[0.25, 0.75]] * length
    return game


def _buffer(batch_size=64, window_size=10, sample_by="position", seed=0) -> ReplayBuffer:
    config = MuZeroConfig(game=GameConfig(discount=1.0), train=TrainConfig(batch_size=batch_size),
                          replay=ReplayConfig(window_size=window_size, sample_by=sample_by))
    return ReplayBuffer(config, np.random.default_rng(seed))


def test_window_keeps_the_newest_games():
    buffer = _buffer(window_size=2)
    games = [_game(3), _game(4), _game(5)]
    for game in games:
        buffer.save_game(game)
    assert list(buffer.buffer) == games[1:] and buffer.games_saved == 3


def test_sample_batch_pads_actions_and_masks_absorbing_policy():
    buffer = _buffer(batch_size=32)
    buffer.save_game(_game(2))
    batch = buffer.sample_batch(num_unroll_steps=3, td_steps=1)
    assert batch.observation.shape == (32, 2) and batch.actions.shape == (32, 3)
    assert batch.target_value.shape == batch.target_reward.shape == batch.policy_mask.shape == (32, 4)
    assert batch.target_policy.shape == (32, 4, 2)
    for row in range(32):
        i = int(batch.observation[row, 0])  # the observation encodes its position
        assert i in (0, 1)
        # Real actions first (history = [0, 1]), then random padding in {0, 1}.
        np.testing.assert_array_equal(batch.actions[row, : 2 - i], [0, 1][i:])
        assert set(batch.actions[row, 2 - i:]) <= {0, 1}
        # Policy targets exist for positions i..1 only: 2 - i of them.
        np.testing.assert_array_equal(batch.policy_mask[row], [1.0] * (2 - i) + [0.0] * (2 + i))
        np.testing.assert_array_equal(batch.target_policy[row, 2 - i:], 0.0)
    # Position 0 of a 2-move game, td 1, discount 1: values [1 + root_values[1] = 2, 1 (past end), 0, 0]
    rows = np.where(batch.observation[:, 0] == 0)[0]
    np.testing.assert_allclose(batch.target_value[rows[0]], [2.0, 1.0, 0.0, 0.0])
    np.testing.assert_allclose(batch.target_reward[rows[0]], [0.0, 1.0, 1.0, 0.0])


@pytest.mark.parametrize("sample_by, expected_long_share", [("position", 9 / 10), ("game", 1 / 2)])
def test_sample_game_weights(sample_by, expected_long_share):
    buffer = _buffer(sample_by=sample_by, seed=1)
    short, long = _game(1), _game(9, start=100.0)
    buffer.save_game(short)
    buffer.save_game(long)
    draws = [buffer.sample_game() is long for _ in range(4000)]
    # "position": P(long) = 9 / (1 + 9); "game": 1/2. Binomial std at n = 4000 is <= 0.008.
    assert np.mean(draws) == pytest.approx(expected_long_share, abs=0.03)




def _random_game(rng: np.random.Generator, length: int, actions: int = 3) -> Game:
    game = Game(action_space_size=actions, discount=0.97)
    game.observations = [rng.normal(size=2).astype(np.float32) for _ in range(length + 1)]
    game.history = rng.integers(actions, size=length).tolist()
    game.rewards = rng.normal(size=length).tolist()
    game.root_values = rng.normal(size=length).tolist()
    visits = rng.random((length, actions))
    game.child_visits = (visits / visits.sum(1, keepdims=True)).tolist()
    return game


@pytest.mark.parametrize("num_unroll_steps, td_steps", [(5, 10), (3, 1), (5, 50)])
def test_vectorized_batch_equals_make_target(num_unroll_steps, td_steps):
    rng = np.random.default_rng(2)
    games = [_random_game(rng, length) for length in (1, 2, 7, 30, 64)]
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


def test_sample_batch_uses_new_games():
    buffer = _buffer(batch_size=16)
    buffer.save_game(_game(3))
    assert set(buffer.sample_batch(2, 1).observation[:, 0]) <= {0.0, 1.0, 2.0}
    buffer.save_game(_game(3, start=100.0))
    buffer.save_game(_game(3, start=200.0))
    # The flat copy is rebuilt after new games: positions of the new games appear.
    seen = set(np.concatenate([buffer.sample_batch(2, 1).observation[:, 0] for _ in range(20)]))
    assert seen & {100.0, 101.0, 102.0} and seen & {200.0, 201.0, 202.0}


def test_incremental_flat_copy_matches_a_fresh_one_through_evictions():
    rng = np.random.default_rng(4)
    config = MuZeroConfig(game=GameConfig(discount=0.97, action_space_size=3),
                          train=TrainConfig(batch_size=4), replay=ReplayConfig(window_size=3))
    buffer = ReplayBuffer(config, rng)
    buffer.save_game(_random_game(rng, 5))
    buffer.sample_batch(2, 3)  # creates the flat copy; later games are appended to it
    # Long games: the arrays grow, the oldest games are evicted, and the copy is compacted.
    for length in (700, 40, 900, 650, 3, 800, 1200, 20):
        game = _random_game(rng, length)
        game.bootstrap_value = float(length) if length % 2 else None
        buffer.save_game(game)
        incremental, fresh = buffer._flat_games(), FlatGames(list(buffer.buffer), 3, buffer.td_steps, 0.97)
        pairs = [(g, i) for g, game in enumerate(buffer.buffer) for i in range(len(game))]
        index = np.array([g for g, _ in pairs])
        positions = np.array([i for _, i in pairs])
        padding = np.zeros((len(pairs), 2), np.int64)
        a = make_batch_vectorized(incremental, index, positions, padding, 2, 3, 0.97)
        b = make_batch_vectorized(fresh, index, positions, padding, 2, 3, 0.97)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    assert len(buffer) == 3
