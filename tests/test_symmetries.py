"""Game symmetries (muzero/symmetries.py): permutations and signs worked by hand, checked
against OpenSpiel's rules and gymnasium's CartPole, applied to a training batch and to the
roots of a search (`search.random_symmetry`)."""

import numpy as np
import pytest

from muzero.config import GameConfig, MuZeroConfig, ReplayConfig, SearchConfig, TrainConfig
from muzero.config_io import ConfigError
from muzero.config_loader import load_config
from muzero.envs import EnvironmentSpecError, check_environment
from muzero.envs.gym import GymEnvironment
from muzero.envs.openspiel import OpenSpielEnvironment
from muzero.game import Game
from muzero.networks.base import NetworkOutput
from muzero.replay import Batch, ReplayBuffer
from muzero.search.types import SearchResult
from muzero.selfplay import BatchedSelfPlay, play_games_batched
from muzero.symmetries import (
    Symmetry,
    apply_symmetry,
    augment_batch,
    board_symmetries,
    grid_transforms,
    map_roots,
    mirror_symmetries,
    search_roots,
    unmap_result,
)
from muzero.video import RecordingEnvironment
from tests.helpers import ROOT, muzero_command

CARTPOLE = str(ROOT / "configs" / "cartpole.yaml")


def test_square_has_eight_distinct_transforms_and_a_quarter_turn_worked_by_hand():
    transforms = grid_transforms(3, 3, rotations=True)
    assert len({tuple(t) for t in transforms}) == 8
    assert list(transforms[0]) == list(range(9))  # the identity first
    # A quarter turn anticlockwise of
    #   0 1 2        2 5 8
    #   3 4 5  is    1 4 7 : cell 2 lands on cell 0, 0 on 6, 6 on 8, 8 on 2, 1 on 3, 4 stays.
    #   6 7 8        0 3 6
    assert list(transforms[1]) == [6, 3, 0, 7, 4, 1, 8, 5, 2]
    # Every transform maps the centre to itself and corners to corners.
    for t in transforms:
        assert t[4] == 4 and {t[0], t[2], t[6], t[8]} == {0, 2, 6, 8}


def test_mirror_of_a_board_of_columns():
    # 2 x 3 grid, left-right mirror: (r, c) -> (r, 2 - c): cells 0 1 2 / 3 4 5 -> 2 1 0 / 5 4 3.
    identity, mirror = grid_transforms(2, 3, rotations=False)
    assert list(identity) == [0, 1, 2, 3, 4, 5]
    assert list(mirror) == [2, 1, 0, 5, 4, 3]
    # Actions are columns: column c -> 2 - c; the observation moves each plane's cells and keeps
    # the extra element (the player) last.
    _, symmetry = board_symmetries(planes=2, rows=2, cols=3, extra=1, actions="columns", rotations=False)
    assert symmetry.action == (2, 1, 0)
    assert symmetry.observation == (2, 1, 0, 5, 4, 3, 8, 7, 6, 11, 10, 9, 12)


@pytest.mark.parametrize("name, count", [("tic_tac_toe", 8), ("connect_four", 2)])
def test_symmetries_agree_with_openspiel_rules(name, count):
    # Playing the mapped moves from the start must give the mapped observation at every
    # move, with the same rewards: this checks the permutations against OpenSpiel's
    # own layout of observations and actions, for every symmetry.
    rng = np.random.default_rng(0)
    symmetries = OpenSpielEnvironment(name).symmetries
    assert len(symmetries) == count
    for _ in range(5):
        for symmetry in symmetries:
            env, mapped = OpenSpielEnvironment(name), OpenSpielEnvironment(name)
            observation, mapped_observation = env.reset(), mapped.reset()
            done = False
            while not done:
                assert np.array_equal(mapped_observation, observation[list(symmetry.observation)])
                assert sorted(symmetry.action[a] for a in env.legal_actions()) == mapped.legal_actions()
                action = int(rng.choice(env.legal_actions()))
                observation, reward, done, _ = env.step(action)
                mapped_observation, mapped_reward, mapped_done, _ = mapped.step(symmetry.action[action])
                assert (mapped_reward, mapped_done) == (reward, done)


def test_augment_batch_maps_observation_actions_and_policies():
    # One symmetry on a 1 x 3 "board" of one plane plus a player element: the mirror.
    # Observation [a, b, c, player] -> [c, b, a, player]; action 0 -> 2; a policy
    # (0.7, 0.2, 0.1) -> (0.1, 0.2, 0.7). Values and rewards pass unchanged.
    mirror = Symmetry(observation=(2, 1, 0, 3), action=(2, 1, 0))
    batch = Batch(
        observation=np.array([[1.0, 2.0, 3.0, 1.0]], np.float32),
        actions=np.array([[0, 1]], np.int32),
        target_value=np.array([[0.5, -0.5, 1.0]]),
        target_reward=np.array([[0.0, 0.0, 1.0]]),
        target_policy=np.array([[[0.7, 0.2, 0.1], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]], np.float32),
        policy_mask=np.array([[1.0, 1.0, 0.0]], np.float32),
    )
    out = augment_batch(batch, (mirror,), np.random.default_rng(0))
    assert out.observation.tolist() == [[3.0, 2.0, 1.0, 1.0]]
    assert out.actions.tolist() == [[2, 1]] and out.actions.dtype == np.int32
    np.testing.assert_allclose(out.target_policy[0], [[0.1, 0.2, 0.7], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    assert out.target_value is batch.target_value and out.policy_mask is batch.policy_mask
    assert batch.observation.tolist() == [[1.0, 2.0, 3.0, 1.0]]  # the input is not modified
    assert out.unroll_observation is None
    # With the consistency loss's observations along the unroll: the same mirror on each,
    # [[4, 5, 6, 0], [7, 8, 9, 1]] -> [[6, 5, 4, 0], [9, 8, 7, 1]].
    unrolled = np.array([[[4.0, 5.0, 6.0, 0.0], [7.0, 8.0, 9.0, 1.0]]], np.float32)
    out = augment_batch(batch._replace(unroll_observation=unrolled), (mirror,), np.random.default_rng(0))
    assert out.unroll_observation.tolist() == [[[6.0, 5.0, 4.0, 0.0], [9.0, 8.0, 7.0, 1.0]]]


def test_augment_batch_negates_by_the_signs():
    # CartPole's mirror: [x, x', angle, angle'] = [0.5, -1.0, 0.02, 0.25] -> [-0.5, 1.0, -0.02, -0.25];
    # left (0) <-> right (1), so actions [0, 1] -> [1, 0] and a policy (0.8, 0.2) -> (0.2, 0.8).
    identity, mirror = mirror_symmetries(4, (1, 0))
    assert identity == Symmetry((0, 1, 2, 3), (0, 1)) and mirror.sign == (-1.0,) * 4
    batch = _blank_batch(np.array([[0.5, -1.0, 0.02, 0.25]], np.float32), num_unroll_steps=2, num_actions=2)
    batch = batch._replace(
        actions=np.array([[0, 1]], np.int32),
        target_policy=np.array([[[0.8, 0.2], [0.3, 0.7], [0.5, 0.5]]], np.float32),
        unroll_observation=np.array([[[1.0, 2.0, 3.0, 4.0], [0.0, -1.0, 0.5, 0.0]]], np.float32),
    )
    out = augment_batch(batch, (mirror,), np.random.default_rng(0))
    np.testing.assert_array_equal(out.observation, np.array([[-0.5, 1.0, -0.02, -0.25]], np.float32))
    assert out.observation.dtype == np.float32 and out.actions.tolist() == [[1, 0]]
    np.testing.assert_allclose(out.target_policy[0], [[0.2, 0.8], [0.7, 0.3], [0.5, 0.5]])
    np.testing.assert_array_equal(out.unroll_observation[0], [[-1.0, -2.0, -3.0, -4.0], [0.0, 1.0, -0.5, 0.0]])
    # Beside a symmetry without signs, that one multiplies by 1: rows drawn as the identity
    # keep their numbers.
    out = augment_batch(
        batch._replace(
            observation=np.tile(batch.observation, (50, 1)),
            actions=np.tile(batch.actions, (50, 1)),
            target_policy=np.tile(batch.target_policy, (50, 1, 1)),
            unroll_observation=None,
        ),
        (identity, mirror),
        np.random.default_rng(3),
    )
    # Signs on integer observations (Atari's uint8 frames) are refused, not wrapped around.
    with pytest.raises(ValueError, match="float observations"):
        augment_batch(
            batch._replace(observation=np.array([[1, 2, 3, 4]], np.uint8)), (mirror,), np.random.default_rng(0)
        )
    kept = out.observation[:, 0] == 0.5
    assert 10 < kept.sum() < 40  # binomial(50, 1/2)
    np.testing.assert_array_equal(out.observation[kept], np.tile(batch.observation, (kept.sum(), 1)))
    np.testing.assert_array_equal(out.observation[~kept], -np.tile(batch.observation, ((~kept).sum(), 1)))


def test_cartpole_mirror_agrees_with_gymnasium():
    # From a state and its negation, pushes the other way give negated states, the same
    # rewards and the same ends, step by step, in gymnasium's own CartPole (random pushes,
    # 5 games to their ends).
    environment, mirrored = GymEnvironment("CartPole-v1", 0), GymEnvironment("CartPole-v1", 1)
    _, mirror = environment.symmetries
    rng = np.random.default_rng(0)
    for _ in range(5):
        observation = environment.reset()
        mirrored.reset()
        mirrored._env.unwrapped.state = -np.asarray(environment._env.unwrapped.state)
        done, steps = False, 0
        while not done:
            action = int(rng.integers(2))
            observation, reward, done, _ = environment.step(action)
            mapped, mapped_reward, mapped_done, _ = mirrored.step(mirror.action[action])
            image = apply_symmetry(observation, mirror)  # the negation
            np.testing.assert_allclose(mapped, image, atol=1e-6)
            np.testing.assert_allclose(mapped, -observation, atol=1e-6)
            assert (mapped_reward, mapped_done) == (reward, done)
            steps += 1
        assert steps > 5


def _blank_batch(observation: np.ndarray, num_unroll_steps: int, num_actions: int) -> Batch:
    """A batch around `observation` [B, D]: action 0 everywhere, zero targets, every policy masked in."""
    rows, steps = len(observation), num_unroll_steps + 1
    return Batch(
        observation=observation,
        actions=np.zeros((rows, num_unroll_steps), np.int32),
        target_value=np.zeros((rows, steps)),
        target_reward=np.zeros((rows, steps)),
        target_policy=np.zeros((rows, steps, num_actions), np.float32),
        policy_mask=np.ones((rows, steps), np.float32),
    )


def test_augment_batch_maps_each_unroll_by_its_rows_symmetry():
    # Identity or mirror per row, over many rows: a row's unrolled observations are mirrored
    # exactly when its observation is. Row r holds [r, r + 0.5, r + 0.25, 1] at k = 0 and
    # [r + k, ...] along the unroll, so a mirrored row starts with r + 0.25 instead of r.
    identity, mirror = Symmetry((0, 1, 2, 3), (0, 1, 2)), Symmetry((2, 1, 0, 3), (2, 1, 0))
    rows = 200
    base = np.arange(rows, dtype=np.float32)[:, None] + np.array([0.0, 0.5, 0.25, 1.0], np.float32)
    unrolled = base[:, None, :] + np.array([1.0, 2.0], np.float32)[None, :, None] * [1, 1, 1, 0]
    batch = _blank_batch(base, num_unroll_steps=2, num_actions=3)._replace(unroll_observation=unrolled)
    out = augment_batch(batch, (identity, mirror), np.random.default_rng(1))
    mirrored = out.observation[:, 0] != base[:, 0]
    assert 60 < mirrored.sum() < 140  # both drawn (binomial(200, 1/2): sd ~7)
    for row in range(rows):
        expected = unrolled[row][:, [2, 1, 0, 3]] if mirrored[row] else unrolled[row]
        np.testing.assert_array_equal(out.unroll_observation[row], expected)


def test_augment_batch_draws_every_symmetry():
    # 8 symmetries, 4,000 rows: each drawn about 500 times (binomial sd ~21).
    symmetries = OpenSpielEnvironment("tic_tac_toe").symmetries
    rows = 4000
    observation = np.zeros((rows, 28), np.float32)
    observation[:, 9 + 0] = 1.0  # a stone on cell 0 (plane 1)
    batch = _blank_batch(observation, num_unroll_steps=1, num_actions=9)
    out = augment_batch(batch, symmetries, np.random.default_rng(1))
    # Cell 0 goes to each corner under 2 of the 8 symmetries: ~1,000 rows per corner.
    corners = np.argmax(out.observation[:, 9:18], axis=1)
    counts = np.bincount(corners, minlength=9)
    assert set(np.flatnonzero(counts)) == {0, 2, 6, 8}
    assert all(850 < counts[c] < 1150 for c in (0, 2, 6, 8))
    # The action moved with the board: cell 0 played goes where the stone went.
    assert np.array_equal(out.actions[:, 0], corners)


def test_games_without_symmetries_refuse_the_option():
    # MountainCar's hill is not symmetric.
    config = MuZeroConfig(game=GameConfig(id="MountainCar-v0", action_space_size=3), replay=ReplayConfig())
    assert check_environment(config.game).symmetries == ()
    with pytest.raises(EnvironmentSpecError) as error:
        check_environment(config.game, augment_symmetries=True)
    assert error.value.key == "replay.augment_symmetries"
    spec = check_environment(GameConfig(id="openspiel:tic_tac_toe", action_space_size=9), augment_symmetries=True)
    assert len(spec.symmetries) == 8
    assert (
        len(check_environment(GameConfig(id="CartPole-v1", action_space_size=2), augment_symmetries=True).symmetries)
        == 2
    )


def test_replay_batches_are_symmetric_images_of_the_plain_ones():
    # Two buffers with the same seed and the same game: sampling draws the same positions
    # and padding, then the augmented buffer maps each row by some symmetry. Every row must
    # be one of the 8 images of the plain row, with its actions and policy moved alike.
    symmetries = OpenSpielEnvironment("tic_tac_toe").symmetries
    game = Game(9, 1.0, OpenSpielEnvironment("tic_tac_toe"))
    for move, action in enumerate((0, 3, 1, 4, 2)):  # X wins on the top row at move 5
        visits = [0] * 9
        visits[(action + 1) % 9], visits[action] = 1, 3 + move
        game.store_visit_statistics(visits, 0.0)
        game.apply(action)
    buffers = []
    for augment in (False, True):
        config = MuZeroConfig(
            game=GameConfig(id="openspiel:tic_tac_toe", action_space_size=9, discount=1.0),
            train=TrainConfig(batch_size=64),
            replay=ReplayConfig(augment_symmetries=augment),
        )
        buffers.append(
            ReplayBuffer(
                config.replay,
                np.random.default_rng(5),
                batch_size=64,
                action_space_size=9,
                td_steps=10,
                discount=1.0,
                symmetries=symmetries,
            )
        )
        buffers[-1].save_game(game)
    plain, augmented = (buffer.sample_batch(num_unroll_steps=2, td_steps=9) for buffer in buffers)
    used = set()
    for row in range(64):
        matches = [
            t
            for t, s in enumerate(symmetries)
            if np.array_equal(augmented.observation[row], plain.observation[row][list(s.observation)])
            and [s.action[a] for a in plain.actions[row]] == augmented.actions[row].tolist()
            and np.allclose(augmented.target_policy[row][:, list(s.action)], plain.target_policy[row])
        ]
        assert matches, row
        used.add(matches[0])
    assert len(used) > 4  # 64 rows over 8 symmetries
    np.testing.assert_array_equal(augmented.target_value, plain.target_value)
    np.testing.assert_array_equal(augmented.target_reward, plain.target_reward)


def test_cli_refuses_symmetries_for_a_game_without_them(tmp_path):
    result = muzero_command(
        "train",
        "--config",
        CARTPOLE,
        "--set",
        "game.id=MountainCar-v0",
        "--set",
        "game.action_space_size=3",
        "--set",
        "replay.augment_symmetries=true",
        "--logdir",
        str(tmp_path / "run"),
    )
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "replay.augment_symmetries: MountainCar-v0 has no known symmetries" in lines[0]
    assert not (tmp_path / "run").exists()


def test_map_roots_and_back_with_a_three_cycle_of_actions_worked_by_hand():
    # Old action a becomes action[a] = (1, 2, 0)[a]: 0 -> 1, 1 -> 2, 2 -> 0 (not its own inverse).
    cycle = Symmetry((1, 0), (1, 2, 0))
    identity = Symmetry((0, 1), (0, 1, 2))
    choice = np.array([1, 0])
    observations = np.array([[5.0, 6.0], [5.0, 6.0]])
    legal = np.array([[True, True, False], [True, True, False]])
    noise = np.array([[0.2, 0.3, 0.5], [0.2, 0.3, 0.5]])
    images, image_legal, image_noise = map_roots(choice, (identity, cycle), observations, legal, noise)
    # Row 0 under the cycle: observation gathered (6, 5); old 0 and 1 legal -> image 1 and 2;
    # noise on old 0, 1, 2 moves to image 1, 2, 0: (0.5, 0.2, 0.3). Row 1 unchanged.
    np.testing.assert_array_equal(images, [[6.0, 5.0], [5.0, 6.0]])
    np.testing.assert_array_equal(image_legal, [[False, True, True], [True, True, False]])
    np.testing.assert_allclose(image_noise, [[0.5, 0.2, 0.3], [0.2, 0.3, 0.5]])
    image_result = SearchResult(
        visit_counts=np.array([[0, 3, 7], [3, 7, 0]]),
        root_value=np.array([1.5, 2.5]),
        action=np.array([2, 1]),
        policy=np.array([[0.0, 0.25, 0.75], [0.25, 0.75, 0.0]]),
    )
    result = unmap_result(image_result, choice, (identity, cycle))
    # Row 0: old a's visits are the image's at (1, 2, 0)[a] = visits (3, 7, 0); the image's
    # action 2 is old action 1 (cycle[1] == 2), the one with 7 visits. Row 1 as searched.
    np.testing.assert_array_equal(result.visit_counts, [[3, 7, 0], [3, 7, 0]])
    np.testing.assert_array_equal(result.action, [1, 1])
    np.testing.assert_allclose(result.policy, [[0.25, 0.75, 0.0], [0.25, 0.75, 0.0]])
    np.testing.assert_array_equal(result.root_value, [1.5, 2.5])
    assert map_roots(choice, (identity, cycle), observations, legal, None)[2] is None


class _LeftLeaningSearch:
    """A stand-in searcher and network that always favour action 0 of the position they are
    given (9 visits against 1), as a lopsided model might; they record what they were shown."""

    def bind(self, network):
        return network

    def initial_inference(self, observations):
        self.seen = np.asarray(observations)
        rows = len(observations)
        return NetworkOutput(self.seen[:, 0], np.zeros(rows), np.zeros((rows, 2)), self.seen)

    def training_steps(self):
        return 0

    def __call__(self, root_output, network, legal, to_play, noise):
        self.legal, self.noise = legal, noise
        visits = np.tile([9, 1], (len(legal), 1))
        return SearchResult(visits, np.asarray(root_output.value), np.zeros(len(legal), np.int64), visits / 10)


def test_search_roots_searches_mirror_images_and_maps_their_statistics_back():
    search = _LeftLeaningSearch()
    observations = np.tile([0.01, 0.02, -0.03, 0.04], (200, 1))
    legal = np.ones((200, 2), bool)
    noise = np.tile([0.9, 0.1], (200, 1))
    symmetries = mirror_symmetries(4, (1, 0))
    result = search_roots(
        search, search, observations, legal, np.zeros(200), noise, symmetries, np.random.default_rng(0)
    )
    mirrored = search.seen[:, 0] < 0  # the rows searched as their image (every number negated)
    assert 60 < mirrored.sum() < 140  # 200 draws of a fair coin
    np.testing.assert_allclose(search.seen[mirrored], -observations[mirrored])
    np.testing.assert_allclose(search.seen[~mirrored], observations[~mirrored])
    # The image's noise on its action 0 is the position's on action 1: (0.1, 0.9).
    np.testing.assert_allclose(search.noise[mirrored], np.tile([0.1, 0.9], (mirrored.sum(), 1)))
    # Image action 0 (9 visits) is the position's action 1: a left-leaning search pushes right
    # from every mirrored position, left from the others.
    np.testing.assert_array_equal(result.visit_counts[mirrored], np.tile([1, 9], (mirrored.sum(), 1)))
    np.testing.assert_array_equal(result.visit_counts[~mirrored], np.tile([9, 1], ((~mirrored).sum(), 1)))
    np.testing.assert_array_equal(result.action, mirrored.astype(np.int64))
    # Without symmetries: searched as given.
    plain = search_roots(search, search, observations, legal, np.zeros(200), noise)
    assert (plain.action == 0).all() and np.array_equal(search.seen, observations)


def test_batched_self_play_with_random_symmetry_stores_the_mapped_back_visits():
    # 32 CartPole games, one move each, searched by the left-leaning search: with
    # search.random_symmetry about half push right (searched as their mirror image), and each
    # game stores the visits of the move it played (9 on it); without it, every game pushes left.
    game_config = GameConfig(id="CartPole-v1", action_space_size=2, discount=0.99)
    search = _LeftLeaningSearch()
    moves = {}
    for random_symmetry in (False, True):
        environments = [GymEnvironment("CartPole-v1", seed=i) for i in range(32)]
        selfplay = BatchedSelfPlay(
            game_config, SearchConfig(random_symmetry=random_symmetry, algorithm="gumbel"), environments, search
        )
        assert len(selfplay.symmetries) == (2 if random_symmetry else 0)
        selfplay.step(search, np.random.default_rng(1), greedy=True)
        games = selfplay.games
        moves[random_symmetry] = [game.history[0] for game in games]
        for game in games:
            assert game.child_visits[0][game.history[0]] == 0.9
    assert moves[False] == [0] * 32
    assert 8 < sum(moves[True]) < 24


def test_random_symmetry_needs_symmetries_and_the_batched_self_play(tmp_path):
    mountain_car = GameConfig(id="MountainCar-v0", action_space_size=3)
    with pytest.raises(EnvironmentSpecError) as error:
        check_environment(mountain_car, search=SearchConfig(random_symmetry=True))
    assert error.value.key == "search.random_symmetry"
    # The batched self-play refuses it too, rather than searching without images.
    with pytest.raises(ValueError, match="search.random_symmetry: GymEnvironment has no symmetries"):
        BatchedSelfPlay(mountain_car, SearchConfig(random_symmetry=True), [GymEnvironment("MountainCar-v0", seed=0)])
    cartpole = GameConfig(id="CartPole-v1", action_space_size=2)
    assert len(check_environment(cartpole, search=SearchConfig(random_symmetry=True)).symmetries) == 2
    assert load_config(CARTPOLE, ["search.random_symmetry=true"]).search.random_symmetry
    with pytest.raises(ConfigError, match="search.random_symmetry: .* set selfplay.batched: true"):
        load_config(CARTPOLE, ["search.random_symmetry=true", "selfplay.batched=false"])


def test_evaluation_and_reanalyse_search_images_too():
    # Evaluation's greedy games (play_games_batched), here with a recorded game's wrapper first:
    # with the left-leaning search, a game searched from its mirror image at its first move pushes
    # right, so 32 games open both ways; every game is played on by the same rule to its end.
    game_config = GameConfig(id="CartPole-v1", action_space_size=2, discount=0.99)
    search = _LeftLeaningSearch()
    environments = [RecordingEnvironment(GymEnvironment("CartPole-v1", seed=0))]
    environments += [GymEnvironment("CartPole-v1", seed=i) for i in range(1, 32)]
    games = play_games_batched(
        game_config,
        SearchConfig(random_symmetry=True, algorithm="gumbel"),
        lambda: search,
        environments,
        np.random.default_rng(2),
        greedy=True,
        searcher=search,
    )
    first_moves = [game.history[0] for game in games]
    assert 8 < sum(first_moves) < 24
    assert all(game.child_visits[i][a] == 0.9 for game in games for i, a in enumerate(game.history))
    # Reanalyse's searcher gets the game's two symmetries with the option, none without.
    from muzero.builder import make_reanalyser
    from muzero.envs import check_config_environment

    overrides = ["reanalyse.fraction=0.8", "selfplay.search=numpy"]
    for flag, count in (("false", 0), ("true", 2)):
        config = load_config(CARTPOLE, [*overrides, f"search.random_symmetry={flag}"])
        reanalyser = make_reanalyser(config, check_config_environment(config), "local", None)
        assert len(reanalyser.symmetries) == count
