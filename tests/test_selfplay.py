"""Tests for muzero/selfplay.py: the batched self-play plays the reference's games."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from muzero.config import (
    GameConfig,
    MuZeroConfig,
    SearchConfig,
    SelfPlayConfig,
    TemperatureSchedule,
    visit_softmax_temperature,
)
from muzero.config_loader import load_config
from muzero.envs.gym import GymEnvironment as Environment
from muzero.envs.openspiel import OpenSpielEnvironment
from muzero.networks.base import UniformNetwork
from muzero.selfplay import BatchedSelfPlay, LocalSelfPlay, play_game, play_games_batched
from tests.helpers import TICTACTOE
from tests.test_batched_search import random_network


def _config(batched: bool) -> MuZeroConfig:
    return MuZeroConfig(
        game=GameConfig(id="CartPole-v1", action_space_size=2, max_moves=60, discount=0.99),
        search=SearchConfig(num_simulations=12),
        selfplay=SelfPlayConfig(batched=batched, num_envs=1),
    )


def test_one_batched_greedy_game_is_the_reference_game():
    network = random_network(np.random.default_rng(5), 4, 2, 6, 16, support=3)
    reference = play_game(
        _config(False), network, Environment("CartPole-v1", 11), np.random.default_rng(0), greedy=True
    )
    config = _config(True)
    (batched,) = play_games_batched(
        config.game, config.search, lambda: network, [Environment("CartPole-v1", 11)], np.random.default_rng(0), True
    )
    # Same environment seed, same network, no noise, T = 0: the same game, move for move.
    assert batched.history == reference.history and len(reference) > 5
    assert batched.child_visits == reference.child_visits
    np.testing.assert_allclose(batched.root_values, reference.root_values, rtol=1e-12)


def test_many_games_with_noise_and_sampling():
    network = random_network(np.random.default_rng(6), 4, 2, 6, 16, support=3)
    environments = [Environment("CartPole-v1", seed) for seed in range(5)]
    calls = []

    def network_fn():
        calls.append(1)
        return network

    config = _config(True)
    games = play_games_batched(
        config.game, config.search, network_fn, environments, np.random.default_rng(1), refresh_interval=4
    )
    assert len(games) == 5 and all(game.environment is None for game in games)
    longest = max(len(game) for game in games)
    # Pulled at the start and every 4 moves of the round.
    assert len(calls) == 1 + (longest - 1) // 4
    for game in games:
        # One observation more than moves; each policy target sums to 1 over the 2 actions.
        assert len(game.observations) == len(game) + 1 == len(game.rewards) + 1
        assert len(game.child_visits) == len(game.root_values) == len(game)
        np.testing.assert_allclose(np.sum(game.child_visits, axis=1), 1.0)
        assert game.terminal() or len(game) == 60
    # Different environment seeds and noise: not all games are the same.
    assert len({tuple(game.history) for game in games}) > 1


class OpeningBiasedNetwork(UniformNetwork):
    """Policy 0.9 on cell 8, value and reward 0: what tic-tac-toe self-play's policy becomes
    once it has trained on its own visit counts for a while (80% of games opened at 8 by
    step 4,000 in a measured run)."""

    def _output(self, batch):
        logits = np.zeros((batch, 9), np.float32)
        logits[:, 8] = np.log(0.9 / (0.1 / 8))
        return super()._output(batch)._replace(policy_logits=logits)


class TrainedOpeningBiasedNetwork(OpeningBiasedNetwork):
    """The same, saying it has trained one step."""

    def training_steps(self) -> int:
        return 1


def _first_moves(config, greedy=False, games=180, network=None):
    environments = [OpenSpielEnvironment("tic_tac_toe") for _ in range(games)]
    selfplay = BatchedSelfPlay(
        config.game,
        config.search,
        environments,
        restart=False,
        random_opening_moves=config.selfplay.random_opening_moves,
        random_moves_before_step=config.selfplay.random_moves_before_step,
    )
    selfplay.step(network or OpeningBiasedNetwork(9), np.random.default_rng(0), greedy=greedy)
    return np.bincount([game.history[0] for game in selfplay.games], minlength=9)


def test_tictactoe_self_play_opens_everywhere_whatever_the_policy():
    # selfplay.random_opening_moves: 1. O learns to answer only the openings X plays in
    # self-play, while a random or perfect X opens anywhere (all nine draw). 180 games: 20
    # expected per opening, standard deviation 4.2; without the random opening the biased
    # policy gives [3, 0, 1, 2, 5, 2, 1, 4, 162].
    openings = _first_moves(
        load_config(
            TICTACTOE, ["selfplay.search=numpy", "search.num_simulations=50", "selfplay.random_opening_moves=1"]
        )
    )
    assert openings.min() >= 8, openings
    assert (
        _first_moves(
            load_config(
                TICTACTOE, ["selfplay.search=numpy", "search.num_simulations=50", "selfplay.random_opening_moves=0"]
            )
        )[8]
        > 100
    )  # the option off


def test_random_move_is_an_opening_move_or_an_early_network():
    from muzero.selfplay import random_move

    # (moves played, network's training steps, random_opening_moves, random_moves_before_step)
    assert random_move(2, 50, 3, 0)  # the game's 3rd move, 3 random openings
    assert not random_move(3, 50, 3, 0)  # its 4th
    assert random_move(40, 0, 0, 1)  # an untrained network, before step 1
    assert not random_move(40, 1, 0, 1)  # one step trained
    assert not random_move(0, 0, 0, 0)  # both off: the pseudocode


def test_moves_are_random_until_the_network_has_trained_enough_steps():
    # selfplay.random_moves_before_step: 1 (and no random opening). The untrained network (0 steps)
    # plays uniformly random moves, here its openings: 20 expected per cell of 180 games, as above.
    # A network that has trained 1 step plays the search's moves again: the biased policy's cell 8
    # (162 of 180 above).
    overrides = ["selfplay.random_opening_moves=0", "selfplay.random_moves_before_step=1"]
    config = load_config(TICTACTOE, ["selfplay.search=numpy", "search.num_simulations=50", *overrides])
    assert _first_moves(config).min() >= 8
    assert _first_moves(config, network=TrainedOpeningBiasedNetwork(9))[8] > 100
    # Not in greedy play: cell 8 in all 10 games.
    assert _first_moves(config, greedy=True, games=10).tolist() == [0] * 8 + [10]
    # The factory hands the option on; and the reference's play_game honours it: 36 games of 10
    # simulations open uniformly at random (4 expected at each cell, so at most a third at 8),
    # (6 here) where without it the biased prior's cell 8 opens all 36.
    from muzero.factories import make_batched_selfplay

    assert make_batched_selfplay(config, [], None).random_moves_before_step == 1
    small = dataclasses.replace(config, search=dataclasses.replace(config.search, num_simulations=10))
    off = dataclasses.replace(small, selfplay=dataclasses.replace(small.selfplay, random_moves_before_step=0))
    rng = np.random.default_rng(1)

    def openings(cfg):
        return [
            play_game(cfg, OpeningBiasedNetwork(9), OpenSpielEnvironment("tic_tac_toe"), rng).history[0]
            for _ in range(36)
        ]

    assert openings(small).count(8) <= 12 and openings(off).count(8) > 18


def test_random_moves_can_have_uniform_policy_targets():
    # selfplay.random_move_policy_target: uniform, with two random opening moves. The first move's
    # policy target is uniform over tic-tac-toe's 9 empty cells (1/9 each), the second's over the 8
    # left (1/8 each, 0 on the taken cell). By default the first is the search's visits, which go
    # mostly to cell 8: the biased prior (0.9 on cell 8, 0.675 or more after the noise's 0.25
    # share), the tie rule's first simulation (the largest action, 8) and the known bounds (a
    # visited child's value 0 normalises to 0.5, an unvisited one scores 0) all favour it. The
    # third move is the search's own, so its target stays the visits in both: mostly cell 8 when
    # it is empty.
    from muzero.factories import make_batched_selfplay

    overrides = ["selfplay.search=numpy", "search.num_simulations=50", "selfplay.random_opening_moves=2"]

    def check(game, target):
        if target == "uniform":
            np.testing.assert_allclose(game.child_visits[0], [1 / 9] * 9)
            second = np.full(9, 1 / 8)
            second[game.history[0]] = 0.0
            np.testing.assert_allclose(game.child_visits[1], second)
        else:
            assert game.child_visits[0][8] > 0.5, game.child_visits[0]
        if 8 not in game.history[:2]:
            assert game.child_visits[2][8] > 0.5, game.child_visits[2]

    rng = np.random.default_rng(0)
    for target in ("uniform", "visits"):
        config = load_config(TICTACTOE, [*overrides, f"selfplay.random_move_policy_target={target}"])
        selfplay = make_batched_selfplay(config, [OpenSpielEnvironment("tic_tac_toe") for _ in range(6)], None)
        selfplay.play(OpeningBiasedNetwork(9), rng, moves=3)
        for game in selfplay.games:
            check(game, target)
        # The reference's play_game, with 10 simulations.
        small = load_config(
            TICTACTOE, [*overrides, "search.num_simulations=10", f"selfplay.random_move_policy_target={target}"]
        )
        for _ in range(3):
            check(play_game(small, OpeningBiasedNetwork(9), OpenSpielEnvironment("tic_tac_toe"), rng), target)


def test_evaluation_play_is_not_randomised():
    # Greedy play takes the most visited move: cell 8 in all 10 games, random opening or not.
    config = load_config(
        TICTACTOE, ["selfplay.search=numpy", "search.num_simulations=50", "selfplay.random_opening_moves=1"]
    )
    assert _first_moves(config, greedy=True, games=10).tolist() == [0] * 8 + [10]


def test_the_temperature_schedule_is_read_in_order():
    # The paper's Atari schedule over training steps: 1.0 below 500k, 0.5 below 750k, then 0.25.
    atari = TemperatureSchedule()
    assert [visit_softmax_temperature(atari, 0, step) for step in (0, 499_999, 500_000, 750_000, 10**7)] == [
        1.0,
        1.0,
        0.5,
        0.25,
        0.25,
    ]
    # Board games count moves instead (training steps ignored): 1.0 for the first 30, then 0.
    board = TemperatureSchedule(by="num_moves", schedule=((30, 1.0), (None, 0.0)))
    assert [visit_softmax_temperature(board, moves, 10**6) for moves in (0, 29, 30)] == [1.0, 1.0, 0.0]
    # A schedule without a final null threshold keeps its last temperature past the end.
    assert visit_softmax_temperature(TemperatureSchedule(schedule=((10, 2.0),)), 0, 11) == 2.0


def test_local_self_play_plays_one_game_per_call_or_one_move_in_every_game():
    from muzero.storage import SharedStorage

    storage = SharedStorage(2)  # before any save: the uniform network
    config = _config(False)
    source = LocalSelfPlay([Environment("CartPole-v1", 3)], play_one_game=lambda *args: play_game(config, *args))
    (game,), moves = source.play(storage, np.random.default_rng(0), lambda: False, 0)
    # One whole game: it ended (CartPole fell) or reached max_moves = 60.
    assert moves == len(game) and (game.terminal() or len(game) == 60)
    environments = [Environment("CartPole-v1", seed) for seed in range(3)]
    batched = LocalSelfPlay(environments, BatchedSelfPlay(config.game, config.search, environments))
    games, moves = batched.play(storage, np.random.default_rng(0), lambda: False, 0)
    # One move in each of the 3 games: no CartPole episode ends after one move.
    assert games == [] and moves == 3
    with pytest.raises(ValueError, match="give one of the two"):
        LocalSelfPlay(environments)


def _gumbel_config(batched: bool) -> MuZeroConfig:
    config = _config(batched)
    return dataclasses.replace(config, search=dataclasses.replace(config.search, algorithm="gumbel"))


@pytest.mark.parametrize("greedy", [True, False], ids=["evaluation", "self_play"])
def test_gumbel_games_play_the_searchs_action_and_store_its_improved_policy(greedy):
    network = random_network(np.random.default_rng(5), 4, 2, 6, 16, support=3)
    reference = play_game(
        _gumbel_config(False), network, Environment("CartPole-v1", 11), np.random.default_rng(0), greedy=greedy
    )
    config = _gumbel_config(True)
    (batched,) = play_games_batched(
        config.game, config.search, lambda: network, [Environment("CartPole-v1", 11)], np.random.default_rng(0), greedy
    )
    # One game, so the batched game draws its [1, A] Gumbel noise from the same stream as
    # play_game's [A]: the same moves and the same policy targets.
    assert batched.history == reference.history and len(reference) > 5
    np.testing.assert_allclose(batched.child_visits, reference.child_visits, rtol=1e-12)
    targets = np.array(reference.child_visits)
    # softmax(logits + sigma(q)): every action keeps some probability, the rows sum to 1, and
    # they are not visit fractions of 12 simulations (multiples of 1/12).
    assert (targets > 0).all()
    np.testing.assert_allclose(targets.sum(axis=1), 1.0)
    assert not np.allclose(targets * 12, np.round(targets * 12))
