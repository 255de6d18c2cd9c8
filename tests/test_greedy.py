"""Tests for muzero/greedy.py: the two greedy players play the same games and moves."""

from __future__ import annotations

import numpy as np

from muzero.config import GameConfig, MuZeroConfig, SearchConfig, SelfPlayConfig
from muzero.envs import EnvironmentSpec
from muzero.envs.gym import GymEnvironment as Environment
from muzero.game import Game
from muzero.greedy import BatchedPlayer, ReferencePlayer, make_greedy_player
from tests.test_batched_search import random_network

SPEC = EnvironmentSpec((4,), np.float32, 2, 1)  # CartPole


def _config(batched: bool) -> MuZeroConfig:
    return MuZeroConfig(
        game=GameConfig(id="CartPole-v1", action_space_size=2, max_moves=40, discount=0.99),
        search=SearchConfig(num_simulations=10),
        selfplay=SelfPlayConfig(batched=batched, num_envs=3, search="numpy"),
    )


def test_the_config_chooses_the_player():
    reference = make_greedy_player(_config(False), SPEC, 3)
    batched = make_greedy_player(_config(True), SPEC, 3)
    assert isinstance(reference, ReferencePlayer) and not reference.side_by_side
    assert isinstance(batched, BatchedPlayer) and batched.side_by_side


def test_both_players_play_the_same_greedy_games_and_moves():
    network = random_network(np.random.default_rng(7), 4, 2, 6, 16, support=3)
    reference, batched = make_greedy_player(_config(False), SPEC, 3), make_greedy_player(_config(True), SPEC, 3)
    # Reference: 3 games one after the other in one environment; batched: one game in each of
    # 3 environments. Seeds 5 for the first game of each: the same first episode, move for move.
    one_by_one = reference.play(network, [Environment("CartPole-v1", 5)], 3, np.random.default_rng(0))
    side_by_side = batched.play(network, [Environment("CartPole-v1", s) for s in (5, 6, 7)], 3, None)
    assert len(one_by_one) == len(side_by_side) == 3
    assert one_by_one[0].history == side_by_side[0].history and len(one_by_one[0]) > 5
    # Moves at the positions of a game: no noise, temperature 0, the most visited action either way.
    games = []
    for length in (0, 2, 4):
        game = Game(2, 0.99, Environment("CartPole-v1", 9))
        for action in one_by_one[0].history[:length]:
            game.apply(action)
        games.append(game)
    assert reference.moves(network, games) == batched.moves(network, games)
