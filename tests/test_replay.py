"""Tests for muzero/replay/buffer.py: the window, sampling games and the buffer's construction.

The flat arrays and priorities are tested in test_replay_flat.py, the targets in
test_replay_targets.py; the games and the buffer they share are made here.
"""

from __future__ import annotations

import numpy as np
import pytest

from muzero.config import GameConfig, MuZeroConfig, ReanalyseConfig, ReplayConfig, TrainConfig
from muzero.envs import EnvironmentSpec
from muzero.factories import make_replay_buffer
from muzero.game import Game
from muzero.replay import ReplayBuffer


def line_game(length: int, start: float = 0.0) -> Game:
    """A 2-action game whose observation i is [start + i, 0], rewards 1, root values length - i."""
    game = Game(action_space_size=2, discount=1.0)
    game.observations = [np.array([start + i, 0.0], np.float32) for i in range(length + 1)]
    game.history = [i % 2 for i in range(length)]
    game.rewards = [1.0] * length
    game.root_values = [float(length - i) for i in range(length)]
    game.child_visits = [[0.25, 0.75]] * length
    return game


def random_game(rng: np.random.Generator, length: int, actions: int = 3) -> Game:
    """A game of random observations, actions, rewards, root values and visit distributions."""
    game = Game(action_space_size=actions, discount=0.97)
    game.observations = [rng.normal(size=2).astype(np.float32) for _ in range(length + 1)]
    game.history = rng.integers(actions, size=length).tolist()
    game.rewards = rng.normal(size=length).tolist()
    game.root_values = rng.normal(size=length).tolist()
    visits = rng.random((length, actions))
    game.child_visits = (visits / visits.sum(1, keepdims=True)).tolist()
    return game


def replay_buffer(
    batch_size=64, window_size=10, sample_by="position", seed=0, actions=2, td_steps=10, discount=1.0, **kwargs
) -> ReplayBuffer:
    """A buffer of `line_game`s (2 actions, discount 1) unless told otherwise; `kwargs`: ReplayBuffer's."""
    replay = kwargs.pop("replay", ReplayConfig(window_size=window_size, sample_by=sample_by))
    return ReplayBuffer(
        replay,
        np.random.default_rng(seed),
        batch_size=batch_size,
        action_space_size=actions,
        td_steps=td_steps,
        discount=discount,
        **kwargs,
    )


def test_window_keeps_the_newest_games():
    buffer = replay_buffer(window_size=2)
    games = [line_game(3), line_game(4), line_game(5)]
    for game in games:
        buffer.save_game(game)
    assert list(buffer.games) == games[1:] and buffer.games_saved == 3 and len(buffer) == 2
    # 4 + 5 moves in the window.
    assert buffer.num_positions() == 9


def test_games_is_a_snapshot_of_the_window():
    buffer = replay_buffer(window_size=2)
    first = line_game(3)
    buffer.save_game(first, training_step=7)
    games = buffer.games
    buffer.save_game(line_game(4))
    # The snapshot taken before still holds the one game; the buffer now has two.
    assert games == (first,) and len(buffer.games) == 2
    assert first.saved_step == 7  # the learner's step when it arrived (Reanalyse's age)


@pytest.mark.parametrize("sample_by, expected_long_share", [("position", 9 / 10), ("game", 1 / 2)])
def test_sample_game_weights(sample_by, expected_long_share):
    buffer = replay_buffer(sample_by=sample_by, seed=1)
    short, long = line_game(1), line_game(9, start=100.0)
    buffer.save_game(short)
    buffer.save_game(long)
    draws = [buffer.sample_game() is long for _ in range(4000)]
    # "position": P(long) = 9 / (1 + 9); "game": 1/2. Binomial std at n = 4000 is <= 0.008.
    assert np.mean(draws) == pytest.approx(expected_long_share, abs=0.03)


def test_sample_batch_uses_new_games():
    buffer = replay_buffer(batch_size=16)
    buffer.save_game(line_game(3))
    assert set(buffer.sample_batch(2, 1).observation[:, 0]) <= {0.0, 1.0, 2.0}
    buffer.save_game(line_game(3, start=100.0))
    buffer.save_game(line_game(3, start=200.0))
    # The flat copy is rebuilt after new games: positions of the new games appear.
    seen = set(np.concatenate([buffer.sample_batch(2, 1).observation[:, 0] for _ in range(20)]))
    assert seen & {100.0, 101.0, 102.0} and seen & {200.0, 201.0, 202.0}


def test_make_replay_buffer_unpacks_the_sections():
    config = MuZeroConfig(
        game=GameConfig(action_space_size=5, discount=0.9),
        train=TrainConfig(batch_size=12, td_steps=4, consistency_loss_weight=0.5),
        replay=ReplayConfig(window_size=7, priority_alpha=0.6, augment_symmetries=True),
        reanalyse=ReanalyseConfig(fraction=0.25, td_steps=3),
    )
    identity = object()  # stands for a Symmetry: the buffer only keeps it
    spec = EnvironmentSpec((3,), np.float32, 5, 1, symmetries=(identity,))
    buffer = make_replay_buffer(config, spec, np.random.default_rng(0))
    assert (buffer.window_size, buffer.batch_size, buffer.action_space_size) == (7, 12, 5)
    # Reanalyse is on: new games' initial priorities use the learner's horizon,
    # reanalyse.td_steps (3), not train.td_steps (4).
    assert (buffer.td_steps, buffer.discount, buffer.priority_alpha) == (3, 0.9, 0.6)
    assert buffer.reanalyse_fraction == 0.25 and buffer.with_unroll_observations
    assert buffer.symmetries == (identity,)
    # augment_symmetries off: the spec's symmetries are not used.
    plain = make_replay_buffer(config.replace(replay=ReplayConfig()), spec, np.random.default_rng(0))
    assert plain.symmetries == () and plain.window_size == 1_000_000
    # Reanalyse off: train.td_steps.
    off = make_replay_buffer(config.replace(reanalyse=ReanalyseConfig()), spec, np.random.default_rng(0))
    assert off.td_steps == 4
