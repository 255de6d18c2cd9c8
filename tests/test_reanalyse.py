"""Tests for muzero/reanalyse.py and Reanalyse's parts of muzero/replay/buffer.py."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from muzero.config import (
    GameConfig,
    MuZeroConfig,
    NetworkConfig,
    ReanalyseConfig,
    ReplayConfig,
    SearchConfig,
    TrainConfig,
)
from muzero.envs import EnvironmentSpec
from muzero.factories import make_replay_buffer, make_run_network, network_factory
from muzero.game import Game
from muzero.reanalyse import (
    LocalReanalyse,
    ReanalyseDriver,
    TargetNetwork,
    reanalyse_noise,
    reanalyse_positions,
    select_positions,
)
from muzero.search import BatchedSearcher, SearchResult
from muzero.selfplay import root_noise
from tests.test_batched_search import RowwiseNetwork, random_network, reference_visits

ACTIONS = 3
SPEC = EnvironmentSpec((4,), np.float32, ACTIONS, 1)  # the observations of `_game`


def _game(length: int, rng: np.random.Generator, first: float = 0.0) -> Game:
    """A one-player game whose observation i is [first + i, noise...] (4 numbers)."""
    game = Game(action_space_size=ACTIONS, discount=0.5)
    game.observations = [
        np.concatenate([[first + i], 3 * rng.normal(size=3)]).astype(np.float32) for i in range(length + 1)
    ]
    game.history = [i % ACTIONS for i in range(length)]
    game.rewards = [1.0] * length
    game.root_values = [100.0] * length  # never a target while Reanalyse bootstraps from θ⁻
    game.child_visits = [[1.0, 0.0, 0.0]] * length
    return game


def _config(train_batch=64, fraction=1.0, discount=0.5, **reanalyse) -> MuZeroConfig:
    return MuZeroConfig(
        game=GameConfig(action_space_size=ACTIONS, discount=discount),
        search=SearchConfig(num_simulations=20),
        train=TrainConfig(batch_size=train_batch),
        replay=ReplayConfig(window_size=10),
        reanalyse=ReanalyseConfig(fraction=fraction, **reanalyse),
    )


def test_reanalysed_policy_targets_are_the_reference_search_on_those_positions():
    rng = np.random.default_rng(0)
    config = _config()
    buffer = make_replay_buffer(config, SPEC, np.random.default_rng(1))
    buffer.save_game(_game(6, rng, first=0.0), training_step=0)
    buffer.save_game(_game(6, rng, first=10.0), training_step=5)
    network = RowwiseNetwork(random_network(rng, obs=4, actions=ACTIONS, hidden=5, width=12, support=3))

    # The oldest statistics first: the game saved at step 0, from its first move on.
    positions = select_positions(buffer, 4)
    np.testing.assert_array_equal(positions.observation[:, 0], [0.0, 1.0, 2.0, 3.0])
    result = reanalyse_positions(BatchedSearcher(config.search, config.discount, 1), network, positions)
    root_output = network.initial_inference(positions.observation)
    expected = reference_visits(config, network, root_output, positions.legal, positions.to_play, 1)
    np.testing.assert_array_equal(result.visit_counts, expected)
    assert len({tuple(v) for v in expected}) >= 2  # not one distribution for all

    # Searched at step 12, replacing self-play statistics of step 0: age 12.
    assert buffer.store_reanalysis(positions.rows, positions.layout, result, 12) == 12.0
    assert buffer.fraction_reanalysed() == pytest.approx(4 / 12)
    # Next come the never-reanalysed: game 1's last 2 moves (step 0), then game 2 (step 5).
    np.testing.assert_array_equal(select_positions(buffer, 5).observation[:, 0], [4.0, 5.0, 10.0, 11.0, 12.0])

    # fraction 1: every sampled position that was reanalysed takes the search's distribution
    # as its policy target (k = 0 and later unroll steps); the others keep self-play's.
    batch = buffer.sample_batch(num_unroll_steps=1, td_steps=2)
    targets = {i: expected[i] / 20.0 for i in range(4)}  # 20 simulations
    seen = set()
    for row in range(len(batch.observation)):
        i = batch.observation[row, 0]
        for k in range(2):
            if batch.policy_mask[row, k]:
                want = targets.get(int(i) + k, [1.0, 0.0, 0.0]) if i < 10 else [1.0, 0.0, 0.0]
                np.testing.assert_allclose(batch.target_policy[row, k], want, rtol=1e-6)
        seen.add(int(i))
    assert {0, 1, 2, 3} <= seen
    assert ((buffer.last_reanalysed >= 0) == (batch.observation[:, 0] < 4)).all()


@pytest.mark.parametrize("priority_alpha", [0.0, 1.0], ids=["uniform", "prioritized"])
def test_fraction_picks_how_many_rows_use_reanalysed_policies(priority_alpha):
    rng = np.random.default_rng(0)
    config = _config(train_batch=40, fraction=0.25)
    config = config.replace(replay=ReplayConfig(window_size=10, priority_alpha=priority_alpha))
    buffer = make_replay_buffer(config, SPEC, np.random.default_rng(2))
    buffer.save_game(_game(5, rng))
    positions = select_positions(buffer, 5)  # the whole game
    visits = np.tile([0, 0, 8], (5, 1))
    buffer.store_reanalysis(positions.rows, positions.layout, SearchResult(visits, np.zeros(5)), 3)
    batch = buffer.sample_batch(num_unroll_steps=0, td_steps=1)
    # round(0.25 * 40) = 10 rows take the reanalysed [0, 0, 1]; the other 30 self-play's [1, 0, 0].
    np.testing.assert_array_equal(batch.target_policy[:10, 0], np.tile([0.0, 0.0, 1.0], (10, 1)))
    np.testing.assert_array_equal(batch.target_policy[10:, 0], np.tile([1.0, 0.0, 0.0], (30, 1)))
    assert (batch.importance_weight is not None) == (priority_alpha > 0)


def test_a_search_with_a_policy_target_stores_it_not_its_visits():
    rng = np.random.default_rng(0)
    config = _config(train_batch=40, fraction=1.0)
    buffer = make_replay_buffer(config, SPEC, np.random.default_rng(2))
    buffer.save_game(_game(5, rng))
    positions = select_positions(buffer, 5)
    # Gumbel MuZero's result: visits [0, 0, 8], but the improved policy [0.2, 0.3, 0.5] is the target.
    policy = np.tile([0.2, 0.3, 0.5], (5, 1))
    result = SearchResult(np.tile([0, 0, 8], (5, 1)), np.zeros(5), np.full(5, 2), policy)
    buffer.store_reanalysis(positions.rows, positions.layout, result, 3)
    batch = buffer.sample_batch(num_unroll_steps=0, td_steps=1)
    np.testing.assert_allclose(batch.target_policy[:, 0], np.tile([0.2, 0.3, 0.5], (40, 1)))


@pytest.mark.parametrize("cut", [False, True], ids=["terminal", "cut_by_time_limit"])
def test_value_targets_bootstrap_from_the_target_network(cut):
    rng = np.random.default_rng(0)
    buffer = make_replay_buffer(_config(train_batch=64), SPEC, np.random.default_rng(3))
    game = _game(4, rng)
    game.bootstrap_value = 100.0 if cut else None  # the stored value: not used either
    buffer.save_game(game)
    # θ⁻ values observation i as 10 * i.
    buffer.bootstrap_value_fn = lambda images: 10.0 * images[:, 0]
    batch = buffer.sample_batch(num_unroll_steps=0, td_steps=2)
    # Rewards 1, discount 0.5, td 2: value(i) = 1 + 0.5 + 0.25 * θ⁻(observation i + 2) when
    # i + 2 < 4: value(0) = 1.5 + 0.25 * 20 = 6.5, value(1) = 1.5 + 0.25 * 30 = 9.
    # value(2) reaches the end: 1.5, plus, when the game was cut, 0.25 * θ⁻(observation 4) = 10.
    # value(3) = 1 (+ 0.5 * 40 = 20 when cut).
    expected = {0: 6.5, 1: 9.0, 2: 1.5 + (10.0 if cut else 0.0), 3: 1.0 + (20.0 if cut else 0.0)}
    for row in range(64):
        assert batch.target_value[row, 0] == pytest.approx(expected[int(batch.observation[row, 0])])
    assert len(set(batch.observation[:, 0].tolist())) == 4


def test_two_player_positions_carry_their_legal_actions_and_player():
    rng = np.random.default_rng(0)
    buffer = make_replay_buffer(_config(), SPEC, np.random.default_rng(0))
    game = _game(3, rng)
    game.num_players, game.players = 2, [0, 1, 0, 1]  # players[i]: to move at observation i
    game.legal = [[0, 1, 2], [1, 2], [2]]  # Game.apply records them before each move
    buffer.save_game(game)
    positions = select_positions(buffer, 3)
    np.testing.assert_array_equal(positions.legal, [[1, 1, 1], [0, 1, 1], [0, 0, 1]])
    np.testing.assert_array_equal(positions.to_play, [0, 1, 0])


def _learner_and_target(interval: int):
    """A small MLP learner network, a θ⁻ refreshed every `interval` steps, a factory for more θ⁻,
    and 5 observations."""
    config = MuZeroConfig(
        game=GameConfig(action_space_size=2),
        network=NetworkConfig(hidden_state_size=4, hidden_layers=(8,), support_size=3),
        reanalyse=ReanalyseConfig(fraction=0.5, target_network_interval=interval),
    )
    spec = EnvironmentSpec((4,), np.float32, 2, 1)
    factory = network_factory(config, spec)
    observation = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    return make_run_network(config, spec), TargetNetwork(interval, factory), factory, observation


def test_target_network_is_refreshed_every_interval_only():
    network, target, factory, observation = _learner_and_target(3)

    def learner_values():  # the numpy mirror θ⁻ runs, of the learner's weights now
        return network.published_network().initial_inference(observation).value

    assert target.maybe_refresh(1, network)  # the first call always copies
    np.testing.assert_array_equal(target.values(observation), learner_values())
    copied = target.values(observation)
    for step in (2, 3, 4, 5, 6, 7):
        _shift_weights(network)
        assert target.maybe_refresh(step, network) == (step % 3 == 0)
        if step % 3 == 0:
            np.testing.assert_array_equal(target.values(observation), learner_values())
            copied = target.values(observation)
        else:
            np.testing.assert_array_equal(target.values(observation), copied)
    assert not np.allclose(copied, learner_values())  # step 7 moved the learner on

    # A checkpoint's target network gives the same values.
    restored = TargetNetwork(3, factory)
    restored.load_state_dict(target.state_dict())
    np.testing.assert_array_equal(restored.values(observation), copied)
    assert restored.step == 6

    # `restore` takes the saved θ⁻ when there is one; without one (a checkpoint from before
    # Reanalyse was on) it copies the restored learner's weights now, whatever the step.
    restored = TargetNetwork(3, factory)
    restored.restore(target.state_dict(), 7, network)
    np.testing.assert_array_equal(restored.values(observation), copied)
    assert restored.step == 6
    restored.restore(None, 7, network)  # 7 is not a multiple of the interval
    np.testing.assert_array_equal(restored.values(observation), learner_values())
    assert restored.step == 7


def _shift_weights(network) -> None:
    """Adds 0.1 to every weight of the learner's network."""
    network.set_weights(
        {
            name: {layer: tuple(w + 0.1 for w in values) for layer, values in layers.items()}
            for name, layers in network.get_weights().items()
        }
    )


def test_target_network_refresh_waits_for_a_value_read_in_progress():
    # The learner's prefetching thread reads θ⁻'s values for a batch while the main thread
    # may refresh θ⁻: a read in progress must finish on the weights it started with, and the
    # refresh must wait for it (without the lock it would copy new weights mid-read).
    network, target, _, observation = _learner_and_target(1)
    target.maybe_refresh(0, network)
    old = target.values(observation)
    _shift_weights(network)
    reading, release, read = threading.Event(), threading.Event(), []
    plain = target._values

    def slow_values(x):  # a read that lasts until the test releases it
        reading.set()
        release.wait(10)
        return plain(x)

    target._values = slow_values
    reader = threading.Thread(target=lambda: read.append(target.values(observation)))
    reader.start()
    assert reading.wait(10)
    refresh = threading.Thread(target=target.maybe_refresh, args=(1, network))
    refresh.start()
    refresh.join(0.5)
    assert refresh.is_alive() and target.step == 0  # waiting for the read
    release.set()
    reader.join(10)
    refresh.join(10)
    np.testing.assert_array_equal(read[0], old)  # the read saw the weights it started with
    assert target.step == 1
    target._values = plain
    assert not np.allclose(target.values(observation), old)  # then the refresh copied


def test_local_reanalyse_searches_whole_batches_as_credit_allows():
    rng = np.random.default_rng(0)
    config = _config(positions_per_step=3.0, batch_size=4)
    buffer = make_replay_buffer(config, SPEC, np.random.default_rng(0))
    buffer.save_game(_game(10, rng))
    network = random_network(rng, obs=4, actions=ACTIONS, hidden=5, width=12, support=3)
    worker = LocalReanalyse(
        config.reanalyse, BatchedSearcher(config.search, config.discount, 1), 0, config.search.root_dirichlet_alpha
    )
    reanalysed = []
    for step in range(1, 6):
        worker.after_training_step(buffer, network, step)
        reanalysed.append(round(buffer.fraction_reanalysed() * 10))
    # Credit 3 per step, batches of 4: credit 3 (no search), 6 -> 2, 5 -> 1, 4 -> 0, 3. The
    # third batch takes the last 2 never-reanalysed positions and 2 reanalysed at step 2.
    assert reanalysed == [0, 4, 8, 10, 10]
    assert worker.state_dict()["credit"] == 3.0
    metrics = worker.metrics(buffer)
    assert metrics["reanalyse/fraction_reanalysed"] == 1.0 and metrics["reanalyse/positions_per_sec"] > 0


def test_reanalyse_root_noise_is_self_plays_or_none():
    buffer = make_replay_buffer(_config(), SPEC, np.random.default_rng(0))
    buffer.save_game(_game(5, np.random.default_rng(0)))
    positions = select_positions(buffer, 3)
    # reanalyse.root_noise off: no alpha, no noise.
    assert reanalyse_noise(None, positions, np.random.default_rng(1)) is None
    noise = reanalyse_noise(0.3, positions, np.random.default_rng(1))
    # Dirichlet samples over each position's legal actions (one player: all 3): each row sums to 1,
    # the same draws as self-play's root noise from the same alpha and RNG.
    assert noise.shape == (3, ACTIONS) and np.allclose(noise.sum(axis=1), 1.0)
    np.testing.assert_array_equal(noise, root_noise(0.3, positions.legal, np.random.default_rng(1)))


def test_default_is_off_and_batches_are_unchanged():
    rng = np.random.default_rng(0)
    games = [_game(5, rng), _game(7, rng, first=10.0)]
    batches = []
    for fraction in (0.0, 1.0):
        buffer = make_replay_buffer(_config(fraction=fraction), SPEC, np.random.default_rng(4))
        for game in games:
            buffer.save_game(game)
        batches.append(buffer.sample_batch(num_unroll_steps=2, td_steps=3))
    # Nothing reanalysed and no target network: Reanalyse on samples what it does off.
    for a, b in zip(batches[0], batches[1]):
        if a is not None:
            np.testing.assert_array_equal(a, b)
    assert MuZeroConfig().reanalyse.fraction == 0.0


def test_positions_out_in_calls_are_not_chosen_again():
    rng = np.random.default_rng(0)
    buffer = make_replay_buffer(_config(), SPEC, np.random.default_rng(0))
    buffer.save_game(_game(6, rng))
    first = select_positions(buffer, 2)
    np.testing.assert_array_equal(first.observation[:, 0], [0.0, 1.0])
    # Rows 0 and 1 are out (a Ray call): the next oldest are 2, 3 and 4.
    again = select_positions(buffer, 3, exclude=[(first.layout, first.rows)])
    np.testing.assert_array_equal(again.observation[:, 0], [2.0, 3.0, 4.0])
    # Rows of an older layout (the flat copy was rebuilt since) exclude nothing.
    np.testing.assert_array_equal(
        select_positions(buffer, 2, exclude=[(first.layout - 1, first.rows)]).rows, first.rows
    )
    assert select_positions(buffer, 9, exclude=[(first.layout, np.arange(6))]) is None


class _AnsweredPool:
    """An `ActorPool` stand-in with one call answered and no free slot (nothing is sent)."""

    def __init__(self, answer):
        self.actors, self.answers = [object()], [answer]

    def collect(self, block: bool = True) -> list:
        answers, self.answers = self.answers, []
        return answers

    def put_network(self, step: int, network) -> None:
        pass

    def free_slots(self) -> list[int]:
        return []


def test_ray_reanalysis_is_labelled_with_the_learners_step_as_games_are():
    from muzero.reanalyse_actors import RayReanalyse, ReanalyseResult

    rng = np.random.default_rng(0)
    config = _config(positions_per_step=4.0, batch_size=4)
    buffer = make_replay_buffer(config, SPEC, np.random.default_rng(0))
    buffer.save_game(_game(4, rng, first=0.0), training_step=0)
    positions = select_positions(buffer, 4)  # game 1, moves 0-3
    buffer.save_game(_game(4, rng, first=10.0), training_step=20)
    # An actor searched game 1 with the weights of step 5; its answer reaches replay at step 30.
    answer = ReanalyseResult(0, 0, "p", positions.rows, positions.layout, SearchResult(np.ones((4, 3)), np.zeros(4)), 5)
    driver = RayReanalyse.__new__(RayReanalyse)
    ReanalyseDriver.__init__(driver, config.reanalyse)
    driver.pool = _AnsweredPool(answer)
    driver.after_training_step(buffer, random_network(rng, obs=4, actions=ACTIONS, hidden=5, width=12, support=3), 30)
    # Labelled 30, the clock game 2 (step 20) carries: game 2's never-reanalysed moves are now
    # the oldest. Labelled with the weights' 5 instead, game 1 would come first again.
    np.testing.assert_array_equal(select_positions(buffer, 4).observation[:, 0], [10.0, 11.0, 12.0, 13.0])
    assert driver.ages == [30.0]  # replaced statistics of step 0: age 30


def test_resuming_a_run_from_before_reanalyse_copies_the_restored_network(tictactoe_tiny_run, tmp_path):
    # Reanalyse turned on at resume: the checkpoint holds no θ⁻, so θ⁻ must be the restored
    # learner's weights. The run's checkpoint is at step 20, not a multiple of the interval 7:
    # a refresh "every 7 steps" would have kept the fresh network's random weights.
    from dataclasses import replace

    from muzero.builder import build_run, make_target_network, resume_run
    from muzero.config_loader import load_config
    from muzero.envs import check_environment
    from muzero.run_dir import CONFIG_FILE
    from tests.helpers import copy_run

    run_dir = copy_run(tictactoe_tiny_run, tmp_path / "run")
    config = load_config(run_dir / CONFIG_FILE)
    config = replace(config, reanalyse=replace(config.reanalyse, fraction=0.5, target_network_interval=7))
    spec = check_environment(config.game)
    parts = build_run(config, run_dir, spec)
    try:
        before = parts.target_network.state_dict()  # θ⁻ of the new network, step 0
        assert resume_run(parts, run_dir) == 20
        assert parts.target_network.step == 20
        observation = np.stack([parts.replay_buffer.games[i].make_image(0) for i in range(3)])
        fresh = make_target_network(config, spec)
        fresh.load_state_dict(before)
        fresh = fresh.values(observation)
        learner = parts.network.published_network().initial_inference(observation).value
        np.testing.assert_allclose(parts.target_network.values(observation), learner, rtol=1e-6)
        assert not np.allclose(fresh, learner)  # the restore changed θ⁻
    finally:
        parts.close()
