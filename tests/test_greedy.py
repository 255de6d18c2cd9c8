"""Tests for muzero/greedy.py: the two greedy players play the same games and moves, with the
evaluation's budget of simulations (`run.eval_simulations`)."""

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


class CountingNetwork:
    """A network that counts the recurrent inferences asked of it (one per simulation)."""

    def __init__(self, network):
        self.network, self.recurrent_calls = network, 0

    def initial_inference(self, observation):
        return self.network.initial_inference(observation)

    def recurrent_inference(self, hidden_state, action):
        self.recurrent_calls += 1
        return self.network.recurrent_inference(hidden_state, action)

    def training_steps(self) -> int:
        return 0


def test_greedy_play_searches_with_the_evaluation_budget():
    from muzero.config import RunConfig
    from muzero.greedy import with_eval_simulations

    for batched in (False, True):
        config = _config(batched)  # search.num_simulations 10
        # (run.eval_simulations, an explicit budget as `muzero evaluate --simulations` passes it,
        # the simulations a greedy search runs): 0 keeps the search's 10; 7 replaces it; an
        # explicit 3 wins over both.
        for eval_simulations, explicit, expected in ((0, None, 10), (7, None, 7), (7, 3, 3)):
            run = RunConfig(eval_simulations=eval_simulations)
            greedy_config = with_eval_simulations(config.replace(run=run), explicit)
            network = CountingNetwork(random_network(np.random.default_rng(7), 4, 2, 6, 16, support=3))
            player = make_greedy_player(greedy_config, SPEC, 1)
            player.moves(network, [Game(2, 0.99, Environment("CartPole-v1", 9))])
            # One root: each simulation expands one leaf with one recurrent inference, in the
            # reference search and in the batched one (its batch is the one root).
            assert network.recurrent_calls == expected, (batched, eval_simulations, explicit)


def test_a_runs_evaluations_and_evaluate_search_with_run_eval_simulations(tiny_run, tmp_path):
    from dataclasses import replace

    from muzero.builder import build_run
    from muzero.config_io import config_to_yaml
    from muzero.config_loader import load_config
    from muzero.envs import check_environment
    from muzero.evaluation import load_run
    from muzero.run_dir import CONFIG_FILE
    from tests.helpers import copy_run

    run_dir = copy_run(tiny_run, tmp_path / "run")
    config = load_config(run_dir / CONFIG_FILE)  # configs/tiny.yaml: 4 simulations, game by game
    config = replace(config, run=replace(config.run, eval_simulations=6))
    (run_dir / CONFIG_FILE).write_text(config_to_yaml(config))
    # `muzero evaluate` (load_run): the run's eval_simulations, unless --simulations says otherwise.
    assert load_run(run_dir)[0].search.num_simulations == 6
    assert load_run(run_dir, 2)[0].search.num_simulations == 2
    # A training run's evaluations: the evaluator's players (its episodes', and the one it makes
    # for matches) search with 6; self-play (one game at a time: `play_game` with the run's
    # config bound) keeps 4.
    parts = build_run(config, run_dir, check_environment(config.game))
    try:
        for player in (parts.evaluator.player, parts.evaluator.make_player(2)):
            assert isinstance(player, ReferencePlayer) and player.config.search.num_simulations == 6
        assert parts.source.play_one_game.args[0].search.num_simulations == 4
    finally:
        parts.close()
