"""Tests for muzero/envs/openspiel.py: two-player board games from OpenSpiel behind the Environment protocol."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from muzero.config import GameConfig, NetworkConfig
from muzero.envs import EnvironmentSpecError, check_environment, openspiel
from muzero.envs.openspiel import OpenSpielEnvironment
from muzero.game import Game
from tests.helpers import TICTACTOE, muzero_command


def test_tic_tac_toe_moves_players_and_returns():
    env = OpenSpielEnvironment("tic_tac_toe")
    observation = env.reset()
    # 3 planes of 3x3 (empty, o, x) and the player to move: 28 numbers; at the start all 9 empty.
    assert observation.shape == (28,) and observation.dtype == np.float32
    assert observation[:9].sum() == 9 and observation[-1] == 0 and env.to_play() == 0
    assert env.legal_actions() == list(range(9)) and env.action_space_size == 9
    rewards = []
    for action in (0, 3, 1, 4):  # x: 0, 1; o: 3, 4 (rows of 3: x has (0,0),(0,1), o has (1,0),(1,1))
        observation, reward, terminated, truncated = env.step(action)
        rewards.append(reward)
    assert rewards == [0.0] * 4 and env.to_play() == 0 and observation[-1] == 0
    assert env.legal_actions() == [2, 5, 6, 7, 8]
    # x completes the top row: +1 to the mover (player 0), and the game ends.
    observation, reward, terminated, truncated = env.step(2)
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert env.state.returns() == [1.0, -1.0] and env.legal_actions() == []
    assert env.to_play() == 1  # who would move next: 5 moves played
    with pytest.raises(ValueError, match="action 5 is not legal here"):
        env.step(5)


@pytest.mark.parametrize("name", ["tic_tac_toe", "connect_four"])
def test_player_planes_are_where_openspiel_puts_each_players_stones(name):
    env = OpenSpielEnvironment(name)
    env.reset()
    shape = env.game.observation_tensor_shape()
    for player in (0, 1):
        before = np.asarray(env.state.observation_tensor(0)).reshape(shape[0], -1).sum(-1)
        env.state.apply_action(env.legal_actions()[0])
        after = np.asarray(env.state.observation_tensor(0)).reshape(shape[0], -1).sum(-1)
        # The raw tensor: the mover's plane gains the one stone played.
        assert after[env.player_planes[player]] - before[env.player_planes[player]] == 1


def test_the_board_is_drawn_as_discs_the_right_way_up():
    colours, c = openspiel.FRAME_COLOURS, openspiel.CELL_PIXELS
    env = OpenSpielEnvironment("connect_four")
    env.reset()
    # x (player 0) plays column 3, o column 3, x column 0. Connect four's tensor holds the
    # bottom row first; the picture holds the top row first, so on its last row (5) columns 0
    # and 3 are red (x), and row 4 column 3 yellow (o, on top of x's stone).
    for action in (3, 3, 0):
        env.step(action)
    frame = env.frame()
    assert frame.shape == (6 * c, 7 * c, 3) and frame.dtype == np.uint8

    def centre(row, col):  # the middle pixel of a cell: inside its disc
        return tuple(frame[row * c + c // 2, col * c + c // 2])

    stones = {(5, 0): "player 0", (5, 3): "player 0", (4, 3): "player 1"}
    for row in range(6):
        for col in range(7):
            assert centre(row, col) == tuple(colours[stones.get((row, col), "empty")]), (row, col)
    # A cell's corner pixel is outside its disc (radius 0.4 of the cell): the board's blue.
    assert tuple(frame[0, 0]) == tuple(frame[5 * c, 3 * c]) == tuple(colours["board"])
    # Tic-tac-toe's tensor holds the top row first: x in the centre (cell 4), o in the top left (0).
    env = OpenSpielEnvironment("tic_tac_toe")
    env.reset()
    env.step(4)
    env.step(0)
    frame = env.frame()
    assert frame.shape == (3 * c, 3 * c, 3)
    assert centre(1, 1) == tuple(colours["player 0"]) and centre(0, 0) == tuple(colours["player 1"])
    assert centre(2, 2) == tuple(colours["empty"])
    # A game whose stone planes are not known here has no picture.
    with pytest.raises(ValueError, match="breakthrough: which planes hold the stones is not known here"):
        OpenSpielEnvironment("breakthrough").frame()


def test_the_board_is_seen_from_the_player_to_move():
    env = OpenSpielEnvironment("tic_tac_toe")
    env.reset()
    # Planes (empty, o, x) of 9 cells; seen from the mover, plane 2 holds the mover's stones
    # and plane 1 the opponent's. x plays cell 0: o to move sees [0] as the opponent's.
    observation = env.step(0)[0]
    assert observation[-1] == 1 and np.flatnonzero(observation[9:18]).tolist() == [0]
    assert observation[18:27].sum() == 0
    # o plays cell 4: x to move sees its own stone at 0 (plane 2) and o's at 4 (plane 1).
    observation = env.step(4)[0]
    assert observation[-1] == 0
    assert np.flatnonzero(observation[18:27]).tolist() == [0] and np.flatnonzero(observation[9:18]).tolist() == [4]
    # The empty plane is the same for both: 7 empty cells.
    assert observation[:9].sum() == 7


def test_a_draw_gives_no_reward_and_a_loss_is_the_opponents_win():
    env = OpenSpielEnvironment("tic_tac_toe")
    env.reset()
    # x o x / x o o / o x x: a full board with no line (OpenSpiel: returns [0, 0]).
    rewards = [env.step(action)[1] for action in (0, 1, 2, 4, 3, 5, 7, 6, 8)]
    assert rewards == [0.0] * 9 and env.state.is_terminal() and env.state.returns() == [0.0, 0.0]
    # Player 1 (o) wins: its last move gets +1, from its own point of view.
    env.reset()
    rewards = [env.step(action)[1] for action in (0, 3, 1, 4, 8, 5)]
    assert rewards[-1] == 1.0 and env.state.returns() == [-1.0, 1.0]


def test_two_player_game_records_players_and_targets():
    game = Game(9, 1.0, OpenSpielEnvironment("tic_tac_toe"))
    for action in (0, 3, 1, 4, 2):
        game.store_visit_statistics([1] * 9, 0.0)
        game.apply(action)
    # x (player 0) wins on move 5: players 0 1 0 1 0, then 1 would move.
    assert game.players == [0, 1, 0, 1, 0, 1] and game.terminal()
    values = [value for value, _, _ in game.make_target(0, 4, td_steps=9)]
    assert values == [1.0, -1.0, 1.0, -1.0, 1.0]


def test_pickled_state_continues_exactly():
    env = OpenSpielEnvironment("connect_four(rows=5,columns=6)")
    env.reset()
    for action in (3, 3, 2):
        env.step(action)
    copy = pickle.loads(pickle.dumps(env))
    assert copy.render() == env.render() and copy.legal_actions() == env.legal_actions()
    assert copy.to_play() == env.to_play() == 1 and copy.action_space_size == 6
    for action in (4, 1, 0):
        a, b = env.step(action), copy.step(action)
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1:] == b[1:]


@pytest.mark.parametrize(
    "game_id, fragment",
    [
        ("openspiel:no_such_game", "openspiel:no_such_game: Unknown game 'no_such_game'"),
        (
            "openspiel:kuhn_poker",
            (
                "only two-player, turn-taking, perfect-information, deterministic, zero-sum games are "
                "supported (imperfect information, chance moves)"
            ),
        ),
        ("openspiel:catch", "(1 player, chance moves, not zero-sum)"),
        # Extra turns: checkers' multiple jumps, a completed box in dots and boxes; amazons
        # splits a move into three actions of one player (a random game finds each at once).
        ("openspiel:checkers", "supported (player 0 moves again after move"),
        ("openspiel:dots_and_boxes", "supported (player 0 moves again after move"),
        ("openspiel:amazons", "supported (player 0 moves again after move 1 of a random game)"),
        ("openspiel:connect_four(rows=5, columns=6)", "Unknown parameter ' columns'"),
    ],
)
def test_games_that_do_not_fit_are_refused(game_id, fragment):
    with pytest.raises(EnvironmentSpecError) as error:
        check_environment(GameConfig(id=game_id, action_space_size=9))
    assert fragment in str(error.value)


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("game.id=openspiel:no_such_game", "game.id: openspiel:no_such_game: Unknown game 'no_such_game'"),
        ("game.id=openspiel:kuhn_poker", "game.id: openspiel:kuhn_poker: only two-player"),
        (
            "game.action_space_size=7",
            ("game.action_space_size: openspiel:tic_tac_toe has 9 actions, but game.action_space_size is 7"),
        ),
        ("network.kind=resnet", "network.downsample: openspiel:tic_tac_toe: a 3x3 board is too small"),
    ],
)
def test_bad_board_games_exit_2_with_one_line(tmp_path, override, fragment):
    result = muzero_command("train", "--config", TICTACTOE, "--set", override, "--logdir", str(tmp_path / "run"))
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], lines
    assert not (tmp_path / "run").exists()


def test_a_resnet_needs_a_board_and_keeps_its_size():
    board_net = NetworkConfig(kind="resnet", downsample=False)
    # Connect four's tensor is [3, 6, 7]: a board. Oware's is [14]: none; CartPole's 4 numbers: none.
    assert check_environment(GameConfig(id="openspiel:connect_four", action_space_size=7), network=board_net)
    for game_id, actions, network, key, fragment in (
        (
            "openspiel:oware",
            6,
            board_net,
            "network.kind",
            "openspiel:oware: its observation tensor has shape [14], not [planes, rows, cols]",
        ),
        ("CartPole-v1", 2, board_net, "network.kind", "CartPole-v1 gives flat observations of shape (4,) and no board"),
        # The 96->6 stack halves a 6x7 board four times: 3x4, 2x2, 1x1, 1x1.
        (
            "openspiel:connect_four",
            7,
            NetworkConfig(kind="resnet"),
            "network.downsample",
            "openspiel:connect_four: a 6x7 board is too small for the 96->6 downsampling stack",
        ),
        # Board action planes: a resnet over a board whose actions are known (breakthrough's 768 moves are not).
        (
            "openspiel:connect_four",
            7,
            NetworkConfig(kind="mlp", action_planes="board"),
            "network.action_planes",
            "needs network.kind resnet and a board game whose actions are cells or columns",
        ),
        (
            "openspiel:breakthrough",
            768,
            dataclasses.replace(board_net, action_planes="board"),
            "network.action_planes",
            "not openspiel:breakthrough with network.kind resnet",
        ),
    ):
        with pytest.raises(EnvironmentSpecError) as error:
            check_environment(GameConfig(id=game_id, action_space_size=actions), network=network)
        assert fragment in str(error.value) and error.value.key == key
    # Where the actions act: connect four's are its columns, tic-tac-toe's its cells.
    board_planes = dataclasses.replace(board_net, action_planes="board")
    spec = check_environment(GameConfig(id="openspiel:connect_four", action_space_size=7), network=board_planes)
    assert (spec.board_shape, spec.board_actions) == ((3, 6, 7), "columns")
    spec = check_environment(GameConfig(id="openspiel:tic_tac_toe", action_space_size=9), network=board_planes)
    assert (spec.board_shape, spec.board_actions) == ((3, 3, 3), "cells")


def test_a_repeated_turn_the_probe_missed_stops_the_game(monkeypatch):
    # Amazons: a move is three actions of one player (queen, destination, arrow), so the
    # first action already leaves player 0 to move again.
    monkeypatch.setattr(openspiel, "repeated_turn", lambda game: None)
    env = openspiel.OpenSpielEnvironment("amazons")
    with pytest.raises(ValueError, match="amazons: player 0 moves again after move 1; only games whose players"):
        env.step(env.legal_actions()[0])
