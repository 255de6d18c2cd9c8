"""MinAtar through the image path (muzero/envs/minatar.py): the plug-in, its frames, and play."""

from __future__ import annotations

import pickle
import typing

import numpy as np
import pytest

pytest.importorskip("minatar")

from muzero.config_io import ConfigError
from muzero.config_loader import load_config
from muzero.envs import EnvironmentSpec, check_environment, make_environment, resolve_game
from muzero.envs.base import EnvironmentSpecError
from muzero.envs.minatar import MinAtarEnvironment, MinAtarSettings
from muzero.game import Game
from tests.helpers import ROOT, load_script, muzero_command

TINY = str(ROOT / "configs" / "minatar" / "tiny.yaml")
CONFIGS = ("breakout", "space_invaders", "asterix", "freeway", "seaquest")


def test_game_ids_resolve_to_the_minatar_plugin():
    for game_id, name in (("minatar:breakout", "breakout"), ("MinAtar/Breakout-v1", "MinAtar/Breakout-v1")):
        plugin, resolved = resolve_game(game_id)
        assert (plugin.name, resolved, plugin.network_kinds) == ("minatar", name, ("resnet",))
    with pytest.raises(EnvironmentSpecError, match="unknown MinAtar game 'pong'"):
        MinAtarEnvironment("pong", 0, MinAtarSettings())


def test_observations_are_uint8_planes_of_0_and_255():
    # Breakout has 4 planes (paddle, ball, trail, brick) and a minimal action set of 3
    # (no-op, left, right); the -v0 id keeps all 6 of MinAtar's actions.
    env = MinAtarEnvironment("breakout", seed=0, settings=MinAtarSettings())
    observation = env.reset()
    assert (observation.shape, observation.dtype, env.action_space_size) == ((10, 10, 4), np.uint8, 3)
    assert set(np.unique(observation)) <= {0, 255} and observation.max() == 255
    observation, reward, _, truncated = env.step(1)
    assert observation.dtype == np.uint8 and isinstance(reward, float) and not truncated
    assert MinAtarEnvironment("MinAtar/Breakout-v0", 0, MinAtarSettings()).action_space_size == 6
    # Space Invaders: 6 planes, 4 actions (no-op, left, right, fire).
    spec = EnvironmentSpec.of(MinAtarEnvironment("space_invaders", 0, MinAtarSettings()))
    assert (spec.observation_shape, spec.action_space_size) == ((10, 10, 6), 4)


def test_the_same_seed_plays_the_same_game_and_a_pickled_game_resumes_exactly():
    def play(env, moves):
        return [env.step(move % 3)[0] for move in range(moves)]

    a, b = (MinAtarEnvironment("breakout", 7, MinAtarSettings()) for _ in range(2))
    assert np.array_equal(a.reset(), b.reset())
    assert all(np.array_equal(x, y) for x, y in zip(play(a, 5), play(b, 5)))
    copy = pickle.loads(pickle.dumps(a))  # sticky actions draw from the game's RandomState: it travels too
    assert all(np.array_equal(x, y) for x, y in zip(play(a, 5), play(copy, 5)))


def test_the_shipped_configs_load_and_fit_their_games():
    for name in (*CONFIGS, "tiny"):
        config = load_config(str(ROOT / "configs" / "minatar" / f"{name}.yaml"))
        assert isinstance(config.game.kwargs, MinAtarSettings)
        assert config.network.kind == "resnet" and not config.network.downsample
        check_environment(config.game)  # action_space_size matches the game's minimal set


def test_minatar_needs_the_resnet():
    with pytest.raises(ConfigError, match="network.kind"):
        load_config(TINY, ["network.kind=mlp"])


def test_make_image_stacks_frames_and_action_planes():
    # stacked_frames n = 2 of Breakout's C = 4 planes: [10, 10, n * C + n] = [10, 10, 10]:
    # channels 0-3 frame o_{i-1}, 4-7 frame o_i, 8 the action into o_{i-1}, 9 the action into o_i.
    env = MinAtarEnvironment("breakout", 0, MinAtarSettings())
    game = Game(3, 0.99, env, stacked_frames=2)
    game.apply(2)
    game.apply(1)
    image = game.make_image(-1)  # i = 2: frames o_1, o_2; actions a_0 = 2 into o_1, a_1 = 1 into o_2
    assert (image.shape, image.dtype) == ((10, 10, 10), np.uint8)
    assert np.array_equal(image[..., :4], game.observations[1]) and np.array_equal(
        image[..., 4:8], game.observations[2]
    )
    assert (image[..., 8] == 2).all() and (image[..., 9] == 1).all()
    first = game.make_image(0)  # i = 0: zeros before the game, o_0, and no incoming actions
    assert (first[..., :4] == 0).all() and np.array_equal(first[..., 4:8], game.observations[0])
    assert (first[..., 8:] == 0).all()


def test_batched_self_play_moves_with_the_resnet_without_downsampling():
    from muzero.factories import make_run_network, make_run_searcher
    from muzero.selfplay import BatchedSelfPlay

    config = load_config(TINY, ["game.max_moves=4"])
    spec = check_environment(config.game)
    network = make_run_network(config, spec)
    # No downsampling: the hidden state keeps the frame's 10x10, with network.planes = 4 planes.
    assert network.image_shape == (10, 10, 10) and network.hidden_shape == (10, 10, 4)
    environments = [make_environment(config.game, seed) for seed in range(2)]
    searcher = make_run_searcher(config, spec, 2)
    selfplay = BatchedSelfPlay(config.game, config.search, environments, searcher)
    games, moves = selfplay.play(network.published_network(0), np.random.default_rng(0), moves=4)
    # 2 games, 4 batched moves: 8 moves; each game ends by game.max_moves = 4 at the latest.
    assert moves == 8 and len(games) >= 2
    for game in games:
        assert len(game) <= 4 and len(game.child_visits) == len(game)
        assert all(abs(sum(visits) - 1) < 1e-6 for visits in game.child_visits)


@pytest.mark.slow
def test_tiny_minatar_run_leaves_a_video_per_evaluation_and_evaluate_records_episodes(tmp_path):
    # configs/minatar/tiny.yaml: 6 training steps, an evaluation every 3: videos at steps 3 and 6.
    run_dir = tmp_path / "run"
    result = muzero_command("train", "--config", TINY, "--logdir", str(run_dir))
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(path.name for path in (run_dir / "videos").iterdir()) == ["step-3.mp4", "step-6.mp4"]

    from muzero.video import read_video

    result = muzero_command("evaluate", "--run", str(run_dir), "--episodes", "2", "--video", str(tmp_path / "v"))
    assert result.returncode == 0, result.stderr[-3000:]
    for i in range(2):
        frames = read_video(tmp_path / "v" / f"episode-{i}.mp4")
        # A 10x10 frame upscaled 16 times (160 / 10); at most max_moves = 30 moves, one frame more.
        assert frames.shape[1:] == (160, 160, 3) and 2 <= len(frames) <= 31


def test_bench_minatar_reads_a_runs_curve_and_plots_it(tmp_path):
    import subprocess
    import sys

    bench = load_script("bench_minatar")
    run_dir = tmp_path / "breakout-seed-0"
    run_dir.mkdir()
    (run_dir / "eval.csv").write_text(
        "training_step,env_steps,games,wall_seconds,eval_seconds,mean_return,std_return\n"
        "500,5000,400,240.0,15.0,0.5,0.6\n1000,10000,800,390.0,30.0,2.0,1.8\n"
    )
    (run_dir / "config.yaml").write_text("game:\n  id: minatar:breakout\nrun:\n  eval_episodes: 30\n")
    rows = bench.curve("breakout", 0, run_dir)
    # Training minutes leave the evaluations out: (240 - 15) / 60 = 3.75 and (390 - 30) / 60 = 6;
    # the episodes per evaluation are the run's own (its config), whatever --episodes says now.
    assert [(row["env_steps"], row["training_minutes"], row["mean_return"], row["episodes"]) for row in rows] == [
        (5000, 3.75, 0.5, 30),
        (10000, 6.0, 2.0, 30),
    ]
    pytest.importorskip("matplotlib")
    bench.plot(rows, ["breakout"], tmp_path / "curves.png", "test")
    assert (tmp_path / "curves.png").stat().st_size > 0
    command = [sys.executable, str(ROOT / "scripts" / "bench_minatar.py"), "--games", "pong"]
    result = subprocess.run(command, check=False, capture_output=True, text=True)
    expected = "--games: unknown pong; expected any of breakout, space_invaders, asterix, freeway, seaquest"
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [f"bench_minatar.py: error: {expected}"]


class _ScriptedGame:
    """Stands in for MinAtarEnvironment: reward 1 per move, the end after `length` moves."""

    length = 3
    made: typing.ClassVar[list] = []

    def __init__(self, name, seed, settings):
        self.made.append((name, settings))
        self.moves = 0

    def reset(self):
        self.moves = 0

    def legal_actions(self):
        return [0, 1, 2]

    def step(self, action):
        self.moves += 1
        return None, 1.0, self.moves == self.length, False


def test_bench_minatar_random_policy_floor_averages_episodes_and_stops_at_max_moves(monkeypatch):
    bench = load_script("bench_minatar")
    monkeypatch.setattr("muzero.envs.minatar.MinAtarEnvironment", _ScriptedGame)
    # Episodes of 3 moves, 1 point each: 3 per episode, whatever the number of episodes.
    assert bench.random_policy_return("freeway", episodes=4) == 3.0
    # The game played as the shipped config plays it: its kwargs (sticky actions 0.1, ramping).
    assert _ScriptedGame.made[-1] == ("freeway", MinAtarSettings(0.1, True))
    # A game that never ends is cut at the config's game.max_moves (Freeway: 2,500).
    monkeypatch.setattr(_ScriptedGame, "length", 10**9)
    assert bench.random_policy_return("freeway", episodes=2) == 2500.0
    # The benchmark's --set overrides reach it as they reach the runs.
    assert bench.random_policy_return("freeway", episodes=2, overrides=["game.max_moves=7"]) == 7.0
