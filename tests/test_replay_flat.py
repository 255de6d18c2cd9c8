"""Tests for muzero/replay/flat.py: the flat copy of the window, n-step values and priorities."""

from __future__ import annotations

import numpy as np
import pytest

from muzero.config import ReplayConfig
from muzero.game import Game
from muzero.replay import FlatGames, ReplayBuffer, make_batch_vectorized
from tests.test_replay import line_game, random_game, replay_buffer


def test_incremental_flat_copy_matches_a_fresh_one_through_evictions():
    rng = np.random.default_rng(4)
    buffer = ReplayBuffer(
        ReplayConfig(window_size=3), rng, batch_size=4, action_space_size=3, td_steps=10, discount=0.97
    )
    buffer.save_game(random_game(rng, 5))
    buffer.sample_batch(2, 3)  # creates the flat copy; later games are appended to it
    # Long games: the arrays grow, the oldest games are evicted, and the copy is compacted.
    for length in (700, 40, 900, 650, 3, 800, 1200, 20):
        game = random_game(rng, length)
        game.bootstrap_value = float(length) if length % 2 else None
        buffer.save_game(game)
        incremental, fresh = buffer._flat_games(), FlatGames(list(buffer.games), 3, buffer.td_steps, 0.97)
        pairs = [(g, i) for g, game in enumerate(buffer.games) for i in range(len(game))]
        index = np.array([g for g, _ in pairs])
        positions = np.array([i for _, i in pairs])
        padding = np.zeros((len(pairs), 2), np.int64)
        a = make_batch_vectorized(incremental, index, positions, padding, 2, 3, 0.97)
        b = make_batch_vectorized(fresh, index, positions, padding, 2, 3, 0.97)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    assert len(buffer) == 3


def test_initial_priorities_are_root_value_minus_n_step_target():
    buffer = replay_buffer(td_steps=2, discount=0.5)
    game = Game(action_space_size=2, discount=0.5)
    game.observations = [np.zeros(2, np.float32)] * 4
    game.history, game.rewards = [0, 1, 0], [1.0, 2.0, 4.0]
    game.root_values, game.child_visits = [8.0, 4.0, 2.0], [[0.5, 0.5]] * 3
    buffer.save_game(game)
    # td 2, discount 0.5:
    #   z_0 = 1 + 0.5 * 2 + 0.25 * root_values[2] = 2.5  -> |8 - 2.5| = 5.5
    #   z_1 = 2 + 0.5 * 4 (bootstrap index 3 is past the end: 0) = 4 -> |4 - 4| = 0
    #   z_2 = 4 -> |2 - 4| = 2
    flat = buffer._flat_games()
    np.testing.assert_allclose(flat.priorities[flat.window()[2]], [5.5, 0.0, 2.0])
    # The same as make_target's value targets.
    targets = [game.make_target(i, 0, 2)[0][0] for i in range(3)]
    np.testing.assert_allclose(flat.priorities[:3], np.abs(np.array(game.root_values) - targets))


# ----- prioritized replay -----


def _prioritized_buffer(
    alpha: float, beta: float = 1.0, epsilon: float = 1.0, batch_size: int = 8, seed: int = 0, normalize: bool = False
) -> ReplayBuffer:
    """Two games with chosen priorities: game A (2 moves) [0, 3], game B (3 moves) [8, 0, 15]."""
    replay = ReplayConfig(
        window_size=10,
        priority_alpha=alpha,
        priority_beta=beta,
        priority_epsilon=epsilon,
        normalize_importance_weights=normalize,
    )
    buffer = replay_buffer(batch_size=batch_size, seed=seed, replay=replay)
    game_a, game_b = line_game(2), line_game(3, start=100.0)  # observation[0] = start + position
    game_a.priorities, game_b.priorities = np.array([0.0, 3.0]), np.array([8.0, 0.0, 15.0])
    buffer.save_game(game_a)
    buffer.save_game(game_b)
    return buffer


# (p + epsilon)^alpha with epsilon 1, alpha 0.5: sqrt([1, 4, 9, 1, 16]) = [1, 2, 3, 1, 4], sum 11.
HAND_P = np.array([1, 2, 3, 1, 4]) / 11
# (1 / (N * P))^beta with N = 5 positions, beta 1: 11 / (5 * [1, 2, 3, 1, 4]).
HAND_W = np.array([11 / 5, 11 / 10, 11 / 15, 11 / 5, 11 / 20])


def test_priority_probabilities_by_hand():
    buffer = _prioritized_buffer(alpha=0.5)
    probability, game_index, positions = buffer.priority_probabilities()
    np.testing.assert_array_equal(game_index, [0, 0, 1, 1, 1])
    np.testing.assert_array_equal(positions, [0, 1, 0, 1, 2])
    np.testing.assert_allclose(probability, HAND_P, rtol=1e-12)
    # alpha 1: P = p + epsilon over the sum: [1, 4, 9, 1, 16] / 31.
    np.testing.assert_allclose(
        _prioritized_buffer(alpha=1.0).priority_probabilities()[0], np.array([1, 4, 9, 1, 16]) / 31, rtol=1e-12
    )


@pytest.mark.parametrize("beta", [1.0, 0.5, 0.0])
def test_importance_weights_by_hand(beta):
    buffer = _prioritized_buffer(alpha=0.5, beta=beta, batch_size=200)
    batch = buffer.sample_batch(num_unroll_steps=2, td_steps=1)
    # Observation[0] names the position: 0, 1 (game A) and 100, 101, 102 (game B), HAND_W's order.
    which = {0.0: 0, 1.0: 1, 100.0: 2, 101.0: 3, 102.0: 4}
    drawn = np.array([which[float(x)] for x in batch.observation[:, 0]])
    assert set(drawn) == {0, 1, 2, 3, 4}  # 200 draws hit each position (P >= 1/11)
    # beta 0.5: the square roots of HAND_W; beta 0: all 1.
    assert batch.importance_weight.dtype == np.float32
    np.testing.assert_allclose(batch.importance_weight, HAND_W[drawn] ** beta, rtol=1e-6)
    # Under P the beta = 1 weights average to 1: sum_i P(i) / (N P(i)) = 1.
    assert np.sum(HAND_P * HAND_W) == pytest.approx(1.0)


def test_normalized_importance_weights_by_hand():
    buffer = _prioritized_buffer(alpha=0.5, batch_size=200, normalize=True)
    batch = buffer.sample_batch(num_unroll_steps=2, td_steps=1)
    which = {0.0: 0, 1.0: 1, 100.0: 2, 101.0: 3, 102.0: 4}
    drawn = np.array([which[float(x)] for x in batch.observation[:, 0]])
    # All 5 positions drawn, so the batch's largest weight is HAND_W's, 11/5 (positions 0 and 3):
    # the weights become HAND_W / (11/5) = [1, 1/2, 1/3, 1, 1/4].
    np.testing.assert_allclose(batch.importance_weight, np.array([1, 1 / 2, 1 / 3, 1, 1 / 4])[drawn], rtol=1e-6)


def test_prioritized_sampling_frequencies_match_probabilities():
    buffer = _prioritized_buffer(alpha=0.5, batch_size=1000, seed=3)
    draws = np.concatenate([buffer.sample_batch(1, 1).observation[:, 0] for _ in range(20)])
    frequency = np.array([np.mean(draws == x) for x in (0.0, 1.0, 100.0, 101.0, 102.0)])
    # 20,000 draws: the standard deviation of a frequency is sqrt(P (1 - P) / n) <= sqrt(0.25 / 20000)
    # = 0.0035; 0.015 is more than 4 of them, a false alarm about once in 10^5 per position.
    np.testing.assert_allclose(frequency, HAND_P, atol=0.015)


def test_zero_priority_without_epsilon_is_never_drawn():
    buffer = _prioritized_buffer(alpha=1.0, epsilon=0.0, batch_size=500)
    # p = [0, 3, 8, 0, 15]: positions A0 and B1 have P = 0.
    drawn = set(buffer.sample_batch(1, 1).observation[:, 0].tolist())
    assert drawn == {1.0, 100.0, 102.0}


def test_alpha_zero_keeps_the_uniform_draws_exactly():
    buffer = _prioritized_buffer(alpha=0.0, batch_size=16, seed=5)
    batch = buffer.sample_batch(num_unroll_steps=2, td_steps=1)
    # The draws of sampling by position: a game with P proportional to its length (2 and 3
    # moves), a position uniform within it, then the padding actions; same generator, same seed.
    rng = np.random.default_rng(5)
    game_index = rng.choice(2, size=16, p=[2 / 5, 3 / 5])
    length = np.array([2, 3])[game_index]
    positions = np.floor(rng.random(16) * length).astype(np.int64)
    padding = rng.integers(2, size=(16, 2))
    np.testing.assert_array_equal(batch.observation[:, 0], np.array([0.0, 100.0])[game_index] + positions)
    for row in range(16):  # both games play 0, 1, 0, ...: history[i:i+2], then padding
        i, n = positions[row], length[row]
        expected = [(i + k) % 2 if i + k < n else padding[row, k] for k in range(2)]
        np.testing.assert_array_equal(batch.actions[row], expected)
    assert batch.importance_weight is None
    assert buffer.rng.bit_generator.state == rng.bit_generator.state


def test_update_priorities_changes_exactly_the_sampled_rows():
    buffer = _prioritized_buffer(alpha=1.0, batch_size=3, seed=1)
    batch = buffer.sample_batch(1, 1)
    flat = buffer._flat_games()
    before = flat.priorities.copy()
    rows = buffer.last_sampled
    # The rows are the sampled positions: observation[0] = start + position, game B from row 2.
    np.testing.assert_array_equal(
        rows, np.where(batch.observation[:, 0] >= 100, batch.observation[:, 0] - 98, batch.observation[:, 0])
    )
    buffer.update_priorities(1000.0 + rows)  # a value per row: a row drawn twice gets one value
    changed = np.flatnonzero(flat.priorities != before)
    np.testing.assert_array_equal(changed, np.unique(rows))
    np.testing.assert_array_equal(flat.priorities[rows], 1000.0 + rows)


def test_priorities_stay_aligned_through_evictions_compaction_and_checkpoints():
    rng = np.random.default_rng(4)

    def make(rng):
        replay = ReplayConfig(window_size=3, priority_alpha=1.0)
        return ReplayBuffer(replay, rng, batch_size=64, action_space_size=3, td_steps=3, discount=0.97)

    buffer = make(rng)
    expected = {}  # id(game) -> its positions' priorities as they should be

    def save(game):
        buffer.save_game(game)
        # Initial priorities as a fresh copy of the window computes them.
        expected[id(game)] = FlatGames([game], 3, 3, 0.97).priorities[: len(game)].copy()

    save(random_game(rng, 5))
    for length in (700, 40, 900, 650, 3, 800, 1200, 20):  # grows, evicts and compacts the arrays
        buffer.sample_batch(2, 3)
        flat = buffer._flat_games()
        where = {row: (g, i) for g, i, row in zip(*flat.window())}
        new = rng.random(len(buffer.last_sampled)) + 10.0
        buffer.update_priorities(new)
        for row, value in zip(buffer.last_sampled, new):
            g, i = where[row]
            expected[id(buffer.games[g])][i] = value  # the last write wins for a repeated row
        save(random_game(rng, length))
        flat = buffer._flat_games()
        for game, m in zip(buffer.games, flat.move_start):
            np.testing.assert_array_equal(flat.priorities[m : m + len(game)], expected[id(game)])
    assert buffer._flat_games().layout >= 1  # compacted at least once

    # A checkpoint round trip (through pickle) keeps them, and samples the same next batch.
    import pickle

    restored = make(np.random.default_rng(0))
    restored.load_state_dict(pickle.loads(pickle.dumps(buffer.state_dict())))
    restored.rng.bit_generator.state = buffer.rng.bit_generator.state
    for game, original in zip(restored.games, buffer.games):
        np.testing.assert_array_equal(game.priorities, expected[id(original)])
    a, b = buffer.sample_batch(2, 3), restored.sample_batch(2, 3)
    for name, x, y in zip(a._fields, a, b):
        np.testing.assert_array_equal(x, y, err_msg=name)


def test_update_after_a_compaction_is_ignored():
    buffer = _prioritized_buffer(alpha=1.0)
    buffer.sample_batch(1, 1)
    flat = buffer._flat_games()
    flat.store_priorities()
    flat._rebuild(flat._games)  # what compaction does: the rows may have moved
    before = flat.priorities.copy()
    buffer.update_priorities(np.full(8, 99.0))
    np.testing.assert_array_equal(flat.priorities, before)
