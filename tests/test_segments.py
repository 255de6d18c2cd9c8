"""Segments (`selfplay.segment_length`): a game handed to replay in pieces has the whole
game's images, targets and batches at every position, and each move is sampled once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from muzero.config import GameConfig, MuZeroConfig, ReplayConfig, SearchConfig, SelfPlayConfig
from muzero.config_io import ConfigError
from muzero.config_loader import load_config
from muzero.envs.gym import GymEnvironment as Environment
from muzero.game import Game
from muzero.replay.buffer import ReplayBuffer
from muzero.replay.flat import FlatGames
from muzero.replay.targets import make_batch_vectorized
from muzero.search.types import SearchResult
from muzero.selfplay import BatchedSelfPlay
from tests.test_batched_search import random_network

K, TD = 3, 4  # unroll and n-step horizon of the targets below: a segment keeps K + TD following moves


def synthetic_game(moves: int, stacked_frames: int = 1, players: bool = False, seed: int = 0) -> Game:
    """A finished game without an environment: frame t is a 2x2 image filled with t, random
    actions of 3, rewards, root values and visit distributions."""
    rng = np.random.default_rng(seed)
    game = Game(3, 0.9, None, stacked_frames)
    game.observations = [np.full((2, 2, 1), t, np.float32) for t in range(moves + 1)]
    game.history = rng.integers(3, size=moves).tolist()
    game.rewards = rng.normal(size=moves).round(3).tolist()
    game.root_values = rng.normal(size=moves).round(3).tolist()
    game.child_visits = rng.dirichlet(np.ones(3), size=moves).tolist()
    if players:
        game.num_players, game.players = 2, [t % 2 for t in range(moves + 1)]
        game.legal = [[0, 1, 2]] * moves
    game.done = game.terminated = True
    return game


def whole_game_targets(game: Game, absolute: int, relative: int) -> list:
    """`game.make_target` at move `absolute`, as a segment sees it at its move `relative`: the
    reward into a segment's position 0 is 0, as at a game's start (it is never trained on:
    training has no reward loss at k = 0)."""
    targets = game.make_target(absolute, K, TD)
    if relative == 0:
        targets[0] = (targets[0][0], 0.0, targets[0][2])
    return targets


def episode_moves(flat: FlatGames, game_index: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The episode's move index of each (stored segment, position) pair of `flat`."""
    return np.array([flat.game(g).first_move for g in game_index], np.int64) + positions


def tile(game: Game, length: int, following: int) -> list[Game]:
    """The segments BatchedSelfPlay hands back for `game`: L moves at a time, the rest at its end."""
    starts = range(0, len(game) - length - following + 1, length)
    segments = [game.segment(start, start + length, following) for start in starts]
    end = len(segments) * length
    return segments + [game.segment(end, len(game), 0, final=True)]


@pytest.mark.parametrize("start", [0, 1, 2, 5])
def test_a_segment_stacks_the_games_frames_and_actions(start):
    game = synthetic_game(20, stacked_frames=3)
    segment = game.segment(start, start + 6, 7)
    # Frames before position 0 of the segment: min(n - 1, start) of them, with their actions.
    assert segment.frames_before == min(2, start) and len(segment) == 13
    for i in range(len(segment) + 1):
        np.testing.assert_array_equal(segment.make_image(i), game.make_image(start + i))
    np.testing.assert_array_equal(segment.make_image(-1), game.make_image(start + 13))
    # By hand, start 5, position 0: frames 3, 4, 5 and the actions into them, a_2, a_3, a_4.
    if start == 5:
        image = segment.make_image(0)
        assert image[0, 0, :3].tolist() == [3, 4, 5]
        assert image[0, 0, 3:].tolist() == game.history[2:5]


@pytest.mark.parametrize("players", [False, True])
def test_every_sampled_position_of_a_segment_has_the_games_targets(players):
    game = synthetic_game(23, players=players)
    game.terminated, game.bootstrap_value = False, 0.7  # cut by a time limit: its last segment bootstraps
    segments = tile(game, 5, K + TD)
    # 23 moves in 5s once 7 more are played: segments at 0, 5, 10, and the rest (15..22) at the end.
    assert [(s.first_move, s.positions(), len(s)) for s in segments] == [
        (0, 5, 12),
        (5, 5, 12),
        (10, 5, 12),
        (15, 8, 8),
    ]
    assert [s.partial for s in segments] == [True, True, True, False]
    for segment in segments:
        for i in range(segment.positions()):
            assert segment.make_target(i, K, TD) == whole_game_targets(game, segment.first_move + i, i)
    # The last one carries the episode: its return and length, not its own 8 moves'.
    assert segments[-1].episode == (pytest.approx(sum(game.rewards)), 23)
    assert segments[-1].episode_return() == game.episode_return() and segments[-1].episode_length() == 23


def test_replay_batches_from_segments_are_the_whole_games():
    game = synthetic_game(30, players=True, seed=3)
    whole = FlatGames([game], 3, TD, 0.9)
    pieces = FlatGames(tile(game, 6, K + TD), 3, TD, 0.9)
    # Every move sampled once: the window of the segments covers moves 0..29 once each.
    game_index, positions, rows = pieces.window()
    absolute = episode_moves(pieces, game_index, positions)
    assert sorted(absolute.tolist()) == list(range(30))
    padding = np.random.default_rng(0).integers(3, size=(len(rows), K))
    batch = make_batch_vectorized(pieces, game_index, positions, padding, K, TD, 0.9)
    expected = make_batch_vectorized(whole, np.zeros(30, np.int64), absolute, padding, K, TD, 0.9)
    first = positions == 0  # a segment's position 0: no reward into it (see whole_game_targets)
    expected = expected._replace(
        target_reward=np.where(first[:, None] & (np.arange(K + 1) == 0), 0.0, expected.target_reward)
    )
    for name, got, want in zip(batch._fields, batch, expected):
        if got is not None:
            np.testing.assert_allclose(got, want, err_msg=name)
    # The initial priorities |root value - n-step value| of the sampled rows are the game's too.
    np.testing.assert_allclose(pieces.priorities[rows], whole.priorities[absolute])


def test_reanalyse_searches_the_moves_a_segments_unrolls_reach():
    game = synthetic_game(30, players=True, seed=4)
    # Three partial segments (moves 0-5, 6-11 and 12-17, each with 7 following moves: the next
    # would need moves up to 30), then moves 18-29.
    segments = tile(game, 6, K + TD)
    assert [(s.first_move, s.positions(), len(s)) for s in segments] == [
        (0, 6, 13),
        (6, 6, 13),
        (12, 6, 13),
        (18, 12, 12),
    ]
    config = ReplayConfig(window_size=10, min_games=1)
    buffer = ReplayBuffer(
        config,
        np.random.default_rng(0),
        batch_size=4,
        action_space_size=3,
        td_steps=TD,
        discount=0.9,
        reanalyse_fraction=1.0,
        num_unroll_steps=K,
    )
    for segment in segments:
        buffer.save_game(segment)
    chosen = buffer.positions_to_reanalyse(1000)
    flat = buffer._flat_games()
    game_index = np.searchsorted(flat.move_start, chosen.rows, side="right") - 1
    relative = chosen.rows - flat.move_start[game_index]
    # Each partial segment: its 6 moves and the first K = 3 following ones; the last: all 12.
    assert [(int(g), int(i)) for g, i in zip(game_index, relative)] == [
        *((g, i) for g in range(3) for i in range(9)),
        *((3, i) for i in range(12)),
    ]
    # Every chosen row searched again, as if move m's search had found distribution D[m] ...
    fresh = np.random.default_rng(1).dirichlet(np.ones(3), size=30)
    absolute = episode_moves(flat, game_index, relative)
    buffer.store_reanalysis(
        chosen.rows, chosen.layout, SearchResult(np.zeros((len(absolute), 3)), None, None, fresh[absolute]), 7
    )
    whole = FlatGames([game], 3, TD, 0.9, reanalyse=True)
    whole.fresh_visits[:30], whole.reanalysed_step[:30] = fresh, 7
    # ... every sampled position's unrolled policy targets are the whole game's with all moves reanalysed.
    game_index, positions, _ = flat.window()
    padding = np.zeros((len(positions), K), np.int64)
    batch = make_batch_vectorized(flat, game_index, positions, padding, K, TD, 0.9, fresh_rows=len(positions))
    moves = episode_moves(flat, game_index, positions)
    expected = make_batch_vectorized(
        whole, np.zeros(len(positions), np.int64), moves, padding, K, TD, 0.9, fresh_rows=len(positions)
    )
    np.testing.assert_allclose(batch.target_policy, expected.target_policy)
    # By hand: the first segment's last sampled move is move 5; its unroll step k = 1 is move 6,
    # a following move of that segment: reanalysed there (D[6]), not self-play's visits.
    row = int(np.flatnonzero((game_index == 0) & (positions == 5))[0])
    np.testing.assert_allclose(batch.target_policy[row, 1], fresh[6], rtol=1e-6)
    assert not np.allclose(fresh[6], game.child_visits[6])


def _config(segment_length: int = 0) -> MuZeroConfig:
    return MuZeroConfig(
        game=GameConfig(id="CartPole-v1", action_space_size=2, max_moves=40, discount=0.99, bootstrap_truncated=True),
        search=SearchConfig(num_simulations=4),
        selfplay=SelfPlayConfig(batched=True, num_envs=3, segment_length=segment_length),
    )


def test_batched_self_play_hands_back_segments_of_the_same_games():
    network = random_network(np.random.default_rng(2), 4, 2, 6, 16, support=3)
    config = _config()

    def play(segment):
        environments = [Environment("CartPole-v1", seed) for seed in (4, 5, 6)]
        selfplay = BatchedSelfPlay(config.game, config.search, environments, restart=False, segment=segment)
        handed, moves, rng = [], 0, np.random.default_rng(0)
        while not all(selfplay.closed):
            games, played = selfplay.play(network, rng, 1)
            handed.extend(games)
            moves += played
        return handed, moves

    games, moves = play(None)
    segments, segment_moves = play((5, K + TD))
    # Segmenting changes what is handed back, not the play: the same moves, counted alike.
    assert moves == segment_moves == sum(len(game) for game in games)
    for game in games:
        mine = [s for s in segments if s.history == game.history[s.first_move : s.first_move + len(s)]]
        pieces = sorted((s for s in mine if s.episode is None or s.episode[1] == len(game)), key=lambda s: s.first_move)
        covered = [s.first_move + i for s in pieces for i in range(s.positions())]
        assert covered == list(range(len(game)))
        last = pieces[-1]
        if len(game) >= 5 + K + TD:  # long enough for a segment before its end
            assert last.episode == (game.episode_return(), len(game)) and last.bootstrap_value == game.bootstrap_value
        for segment in pieces:
            for i in range(segment.positions()):
                assert segment.make_target(i, K, TD) == whole_game_targets(game, segment.first_move + i, i)
    assert any(len(game) >= 5 + K + TD for game in games)  # some game was cut into segments
    assert sum(not s.partial for s in segments) == len(games)  # one last piece per game


def test_segments_need_the_batched_self_play():
    cartpole = Path(__file__).resolve().parents[1] / "configs" / "cartpole.yaml"
    assert load_config(cartpole, ["selfplay.segment_length=50"]).selfplay.segment_length == 50
    with pytest.raises(ConfigError, match="selfplay.segment_length: .* set selfplay.batched: true"):
        load_config(cartpole, ["selfplay.segment_length=50", "selfplay.batched=false"])
    with pytest.raises(ConfigError, match="selfplay.segment_length"):
        load_config(cartpole, ["selfplay.segment_length=-1"])
