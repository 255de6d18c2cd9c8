"""Tests for muzero/atari.py and the stacked Atari observation (Game.make_image), on a real ALE game."""

from __future__ import annotations

import pickle
import tracemalloc

import numpy as np
import pytest

from muzero.config import GameConfig, MuZeroConfig, ReplayConfig, TrainConfig
from muzero.envs.atari import AtariEnvironment, AtariSettings
from muzero.game import Game, image_shape
from muzero.replay import ReplayBuffer

FRAME_BYTES = 96 * 96 * 3  # one uint8 RGB frame


@pytest.fixture(scope="module")
def pong():
    return AtariEnvironment("ALE/Pong-v5", seed=7, settings=AtariSettings())


def test_wrapping_follows_the_config(pong):
    ale = pong._env.unwrapped
    assert pong.action_space_size == 18  # full_action_space: the paper's 18 actions for every game
    assert pong.observation_shape == (96, 96, 3)
    assert ale._frameskip == 1  # the wrapper repeats, not the base environment
    assert pong._env.frame_skip == 4 and pong._env.noop_max == 30
    assert ale.ale.getFloat("repeat_action_probability") == 0.0  # no sticky actions by default
    sticky = AtariEnvironment("ALE/Pong-v5", 0, AtariSettings(sticky_action_probability=0.25, full_action_space=False))
    assert sticky._env.unwrapped.ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
    assert sticky.action_space_size == 6  # Pong's minimal action set


def test_stacked_image_holds_frames_in_order_and_action_planes(pong):
    n = 32
    game = Game(18, 0.997, pong, stacked_frames=n)
    actions = [(3 * i + 1) % 18 for i in range(40)]
    for action in actions:
        game.apply(action)
    assert image_shape(n, (96, 96, 3)) == (96, 96, 128)

    # At state 40 the stack is o_9 .. o_40 (oldest first), and frame o_j came from action a_{j-1}.
    image = game.make_image(40)
    assert image.shape == (96, 96, 128) and image.dtype == np.uint8
    for j in range(n):
        np.testing.assert_array_equal(image[..., 3 * j : 3 * j + 3], game.observations[9 + j])
        assert np.all(image[..., 96 + j] == actions[9 + j - 1])
    np.testing.assert_array_equal(game.make_image(-1), image)  # -1 is the newest state

    # At state 2 only o_0, o_1, o_2 exist: 29 zero frames first, then those three; o_0 has
    # no incoming action (plane of zeros), o_1 and o_2 have a_0 and a_1.
    early = game.make_image(2)
    assert not early[..., : 29 * 3].any()
    for j, frame in enumerate((0, 1, 2)):
        np.testing.assert_array_equal(early[..., (29 + j) * 3 : (30 + j) * 3], game.observations[frame])
    assert not early[..., 96 : 96 + 30].any()
    assert np.all(early[..., 126] == actions[0]) and np.all(early[..., 127] == actions[1])


def test_frames_change_and_rewards_are_not_clipped():
    # Space Invaders scores 5 to 30 points per invader: clipped rewards would never exceed 1.
    env = AtariEnvironment("ALE/SpaceInvaders-v5", seed=1, settings=AtariSettings(noop_max=0))
    first = env.reset()
    rewards, frames = [], []
    for i in range(300):
        observation, reward, _, _ = env.step(1 + i % 5)  # FIRE, UP, RIGHT, LEFT, DOWN in turn
        rewards.append(reward)
        frames.append(observation)
    assert not np.array_equal(first, frames[-1])
    assert max(rewards) >= 5.0


def test_pickled_environment_continues_the_same_game():
    # Sticky actions draw from the emulator's RNG: the pickle must carry it.
    env = AtariEnvironment("ALE/Breakout-v5", seed=3, settings=AtariSettings(sticky_action_probability=0.25))
    env.reset()
    for i in range(50):
        env.step(i % 4)
    copy = pickle.loads(pickle.dumps(env))
    assert copy.episodes == env.episodes
    for i in range(100):
        a, b = env.step(i % 4), copy.step(i % 4)
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1:] == b[1:]


def test_replay_stores_each_frame_once(pong):
    """Bytes per stored step, measured by tracemalloc (numpy reports its buffers to it).

    Bound from the issue: 1.1 x (one 96x96x3 frame + its action + its targets). The action
    is an int (8 bytes); the targets are a reward, a root value (8 bytes each) and the 18
    visit fractions (8 bytes each): 27,648 + 8 + 16 + 144 = 27,816 bytes.
    """
    config = MuZeroConfig(
        game=GameConfig(action_space_size=18), replay=ReplayConfig(window_size=100), train=TrainConfig(batch_size=4)
    )
    games = []
    rng = np.random.default_rng(0)
    for _ in range(3):
        game = Game(18, 0.997, pong, stacked_frames=32)
        for _ in range(200):
            game.apply(int(rng.integers(18)))
            game.store_visit_statistics(rng.integers(5, size=18).tolist(), float(rng.normal()))
        game.environment = None
        games.append(game)
    steps = sum(len(game) for game in games)

    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    buffer = ReplayBuffer(
        config.replay, np.random.default_rng(0), batch_size=4, action_space_size=18, td_steps=10, discount=0.997
    )
    for game in pickle.loads(pickle.dumps(games)):  # fresh copies, allocated while traced
        buffer.save_game(game)
    buffer.sample_batch(num_unroll_steps=5, td_steps=10)  # builds the flat arrays of the batch path
    stored = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    per_step = stored / steps
    bound = 1.1 * (FRAME_BYTES + 8 + 16 + 18 * 8)
    print(f"replay bytes per stored step: {per_step:.0f} ({per_step / FRAME_BYTES:.3f} frames)")
    assert FRAME_BYTES < per_step <= bound, per_step
