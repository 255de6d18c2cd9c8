"""Tests for muzero/actors.py: self-play actors on a real local Ray cluster.

The cluster is started once for the module (`ray start --head --block` on loopback) and
stopped by ending that process, which stops exactly the Ray processes it started.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from muzero.actors import SelfPlayWorker, actor_seeds
from muzero.config import ActorsConfig, GameConfig, MuZeroConfig, ReanalyseConfig, ReplayConfig, SelfPlayConfig
from muzero.config_loader import load_config
from muzero.envs import EnvironmentSpec
from muzero.networks.base import UniformNetwork
from muzero.run_dir import complete_steps

ROOT = Path(__file__).resolve().parents[1]
# With pytest-xdist, all of this module on one worker: one Ray cluster at a time.
pytestmark = pytest.mark.xdist_group("ray")
TINY = str(ROOT / "configs" / "tiny.yaml")
RAY = str(Path(sys.executable).parent / "ray")
# CartPole: 4 floats, 2 actions, one player.
SPEC = EnvironmentSpec((4,), np.float32, 2, 1)


def _env() -> dict:
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", RAY_USAGE_STATS_ENABLED="0")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_address():
    """A one-node Ray cluster on loopback with 4 CPUs (2 actors + spare), for this module."""
    port = _free_port()
    address = f"127.0.0.1:{port}"
    temp_dir = tempfile.mkdtemp(prefix="ray")  # short: Ray's socket paths must stay under 107 bytes
    log = Path(temp_dir) / "head.log"
    # Token authentication (Ray's default for a new cluster), stated for the head and every
    # driver, in-process ones included: set before this process imports Ray. The token is the
    # session's own (RAY_AUTH_TOKEN_PATH, set by conftest.py), never one from the user's home.
    assert Path(os.environ["RAY_AUTH_TOKEN_PATH"]).is_file()
    auth_mode = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "token"
    head = subprocess.Popen(
        [
            RAY,
            "start",
            "--head",
            "--block",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--num-cpus=4",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={temp_dir}",
        ],
        env=_env(),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 90
        while "Ray runtime started" not in log.read_text():
            assert head.poll() is None and time.time() < deadline, log.read_text()[-2000:]
            time.sleep(0.2)
        yield address
    finally:
        head.terminate()  # --block: the head stops the processes it started, then exits
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
        shutil.rmtree(temp_dir, ignore_errors=True)
        if auth_mode is None:
            os.environ.pop("RAY_AUTH_MODE")
        else:
            os.environ["RAY_AUTH_MODE"] = auth_mode


def muzero(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "muzero.cli", *args],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        check=False,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def _scalars(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    import tensorflow as tf

    out = []
    for path in sorted(run_dir.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            out += [(event.step, float(tf.make_ndarray(v.tensor))) for v in event.summary.value if v.tag == tag]
    return out


# ----- without Ray: the actor's body and its seeds -----


def test_actor_seeds_are_distinct_and_reproducible():
    seeds = {(i, k, s): actor_seeds(0, i, k, s)[0] for i in range(3) for k in range(3) for s in (0, 100)}
    # 3 actors x 3 incarnations x 2 start steps: 18 different environment seeds.
    assert len(set(seeds.values())) == 18
    assert actor_seeds(0, 1, 2, 100)[0] == seeds[(1, 2, 100)]
    assert actor_seeds(0, 1, 2, 100)[1].random() == actor_seeds(0, 1, 2, 100)[1].random()
    assert actor_seeds(1, 1, 2, 100)[0] != seeds[(1, 2, 100)]  # the run seed counts too


def _small_config(**actors) -> MuZeroConfig:
    return load_config(TINY).replace(selfplay=SelfPlayConfig(batched=True, num_envs=2), actors=ActorsConfig(**actors))


def test_worker_plays_whole_games_and_counts_moves(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "restored after the test")
    config = _small_config().replace(game=GameConfig(max_moves=10, discount=0.99))
    worker = SelfPlayWorker(config, SPEC, actor_index=1, start_step=0)
    result = worker.play(incarnation=0, weights_step=0, weights=[UniformNetwork(2)], moves=25)
    # 25 batched moves in each of 2 games in progress: 50 moves. Games end within 10
    # moves (max_moves), so at least 2 per environment ended: 25 // 10 = 2.
    assert result.moves == 50 and result.actor_index == 1 and result.incarnation == 0
    assert len(result.games) >= 4
    assert all(1 <= len(game) <= 10 and game.environment is None for game in result.games)
    assert sum(len(game) for game in result.games) + worker.selfplay.moves_in_progress() == 50
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""  # no GPU for a GPU-less actor
    # Same seed, actor and incarnation: the same games; a new incarnation: other games.
    again = SelfPlayWorker(config, SPEC, actor_index=1, start_step=0).play(0, 0, [UniformNetwork(2)], 25)
    assert [g.history for g in again.games] == [g.history for g in result.games]
    restarted = SelfPlayWorker(config, SPEC, actor_index=1, start_step=0).play(1, 0, [UniformNetwork(2)], 25)
    assert [g.history for g in restarted.games] != [g.history for g in result.games]


# ----- config and flags through the real command -----


@pytest.mark.parametrize(
    "args, fragment",
    [
        (
            ["--set", "actors.num_actors=2", "--set", "actors.min_live_actors=3"],
            "--set actors.min_live_actors=3: actors.min_live_actors: expected at most actors.num_actors (2), got 3",
        ),
        (
            ["--set", "actors.num_actors=-1"],
            "--set actors.num_actors=-1: actors.num_actors: expected a value >= 0, got -1",
        ),
        (
            ["--set", "actors.max_restarts=-2"],
            "--set actors.max_restarts=-2: actors.max_restarts: expected a value >= -1, got -2",
        ),
        (
            ["--set", "actors.call_timeout_seconds=0"],
            "--set actors.call_timeout_seconds=0: actors.call_timeout_seconds: expected a value > 0.0, got 0.0",
        ),
        (
            ["--set", "actors.max_inflight=2"],
            "--set actors.max_inflight=2: actors.max_inflight: unknown key (did you mean 'max_inflight_per_actor'?)",
        ),
        (["--backend", "local", "--ray-address", "127.0.0.1:1"], "--ray-address: only with --backend ray or auto"),
        # Port 1 on loopback: nothing listens there, so the connection is refused at once.
        (
            ["--backend", "ray", "--ray-address", "127.0.0.1:1"],
            "--ray-address 127.0.0.1:1: no Ray cluster answers there (Connection refused); start one with `ray start --head`",
        ),
    ],
)
def test_bad_actor_settings_exit_2_with_one_line(tmp_path, args, fragment):
    result = muzero("train", "--config", TINY, "--logdir", str(tmp_path / "run"), *args)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert lines == [f"muzero train: error: {fragment}"]
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_local_backend_never_imports_ray(tmp_path):
    probe = (
        "import sys\n"
        "from muzero.cli import main, parse_flags\n"
        f"code = main(parse_flags(['muzero', 'train', '--config', {TINY!r}, '--logdir', {str(tmp_path / 'run')!r},"
        " '--set', 'train.training_steps=4', '--backend', 'local']))\n"
        "print(code, 'ray' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=300, env=_env(), cwd=ROOT
    )
    assert result.stdout.split()[-2:] == ["0", "False"], result.stderr[-2000:]


# ----- on the cluster -----


@pytest.mark.slow
def test_train_and_resume_through_ray_address(tmp_path, ray_address):
    run_dir = tmp_path / "run"
    # Games of at most 5 moves (CartPole lasts 8 moves or more): each call of 5 moves in 2 games
    # ends both of them, so an actor that finishes any call has sent games.
    settings = [
        "--backend",
        "ray",
        "--ray-address",
        ray_address,
        "--set",
        "selfplay.num_envs=2",
        "--set",
        "actors.num_actors=2",
        "--set",
        "actors.moves_per_call=5",
        "--set",
        "replay.window_size=1000",
        "--set",
        "game.max_moves=5",
    ]
    result = muzero("train", "--config", TINY, "--logdir", str(run_dir), "--set", "train.training_steps=40", *settings)
    assert result.returncode == 0, result.stderr[-3000:]
    # Games reached replay from every actor: both counts are above 0. 40 steps at 0.5 steps per
    # move need 80 moves, 8 calls of 10: one actor would have to stall through 8 calls of the
    # other, and the learner's 40 steps between them, for a count to stay 0. (With 10 steps,
    # 2 calls, one actor's first two answers sometimes ended the run before the other's first.)
    match = re.search(r"self-play actors: 0 restarts; games per actor: (\d+) (\d+)\n", result.stderr)
    assert match and int(match.group(1)) > 0 and int(match.group(2)) > 0, result.stderr[-3000:]
    assert (run_dir / "checkpoints" / "ckpt-40.complete").is_file()
    assert _scalars(run_dir, "actors/live")[-1][1] == 2.0 and _scalars(run_dir, "actors/restarts")[-1][1] == 0.0
    # 2 actors x 2 calls each (actors.max_inflight_per_actor, default 2) at most.
    assert 0 < max(value for _, value in _scalars(run_dir, "actors/inflight")) <= 4
    assert (run_dir / "backend.txt").read_text() == "ray\n"  # for a later --resume without --backend

    # Resume on the actors: replay and learner come from the checkpoint, actors start fresh
    # games; here with the compiled search, so TensorFlow and XLA run inside the actors.
    result = muzero(
        "train",
        "--resume",
        str(run_dir),
        "--set",
        "train.training_steps=60",
        "--set",
        "selfplay.search=compiled",
        *settings,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"resumed from .*ckpt-40 at training step 40", result.stderr)
    assert (run_dir / "checkpoints" / "ckpt-60.complete").is_file()
    # The learner trains only as the actors play: 60 steps at steps_per_move 0.5 took 120 moves or
    # more (the count of moves goes on from the checkpoint's).
    match = re.search(r"done: 60 training steps, \d+ games, (\d+) moves", result.stderr)
    assert match and int(match.group(1)) >= 120, result.stderr[-3000:]

    # And on in this process (--backend local): the checkpoint has no local games in
    # progress, so local self-play starts fresh games in fresh environments.
    result = muzero(
        "train",
        "--resume",
        str(run_dir),
        "--set",
        "train.training_steps=65",
        "--set",
        "selfplay.num_envs=2",
        "--set",
        "game.max_moves=5",
        "--backend",  # named: without it the resume would stay on the run's own back end, Ray
        "local",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (run_dir / "checkpoints" / "ckpt-65.complete").is_file()
    # The record follows the last session that saved a checkpoint; leaving Ray warns of nothing.
    assert (run_dir / "backend.txt").read_text() == "local\n"
    assert "not bit-exact" not in result.stderr


@pytest.mark.slow
def test_atari_on_actors(tmp_path, ray_address):
    # The resnet's published weights (not runnable in numpy) travel by ray.put to actors that
    # run ALE Pong with the compiled search. Games last max_moves = 6 moves, so each call of 6
    # moves ends both games of its actor: an actor that finishes any call has sent games. 12
    # training steps at 0.25 steps per move take 48 moves: 4 calls, the first two handed
    # out one to each actor.
    run_dir = tmp_path / "run"
    result = muzero(
        "train",
        "--config",
        str(ROOT / "configs" / "atari" / "tiny.yaml"),
        "--logdir",
        str(run_dir),
        "--backend",
        "ray",
        "--ray-address",
        ray_address,
        "--set",
        "actors.num_actors=2",
        "--set",
        "actors.moves_per_call=6",
        "--set",
        "game.max_moves=6",
        "--set",
        "train.training_steps=12",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    match = re.search(r"games per actor: (\d+) (\d+)\n", result.stderr)
    assert match and int(match.group(1)) > 0 and int(match.group(2)) > 0, result.stderr[-3000:]
    assert (run_dir / "checkpoints" / "ckpt-12.complete").is_file()


def _ray_config(training_steps: int = 60, **actors) -> MuZeroConfig:
    config = _small_config(**actors)
    return config.replace(
        train=dataclasses.replace(config.train, training_steps=training_steps),
        replay=ReplayConfig(window_size=1000, min_games=2),
    )


@pytest.mark.slow
def test_killed_actor_is_restarted_and_no_game_is_lost(tmp_path, ray_address):
    import ray

    from muzero.builder import build_trainer

    # 200 steps: a restart takes seconds (a new worker process), training 60 steps less than that.
    config = _ray_config(training_steps=200, num_actors=2, moves_per_call=5, max_restarts=2)
    seen: dict = {}

    def kill_at_step_20(batch):
        trainer = seen["trainer"]
        if trainer.learner.training_step == 20 and "replay" not in seen:
            seen["replay"] = list(trainer.replay_buffer.games)
            seen["games_by_actor"] = trainer.source.actors.games_by_actor
            ray.kill(trainer.source.actors.actors[0].handle, no_restart=False)
        elif "replay" in seen and trainer.source.actors.restarts == 0:
            time.sleep(0.05)  # a slower learner until the restarted actor answers: actor 1 alone must not end the run
        return batch

    trainer = build_trainer(
        config, tmp_path / "run", SPEC, batch_hook=kill_at_step_20, backend="ray", ray_address=ray_address
    )
    seen["trainer"] = trainer
    result = trainer.run()
    assert result["training_step"] == 200  # training went on to the end
    assert result["actor_restarts"] == 1  # one kill, one restart
    # Every game in replay at the kill is still there (the window of 1000 drops none).
    kept = {id(game) for game in trainer.replay_buffer.games}
    assert seen["replay"] and all(id(game) in kept for game in seen["replay"])
    # Both actors, the restarted one included, sent games after the kill.
    assert all(after > before for before, after in zip(seen["games_by_actor"], result["games_by_actor"]))
    assert _scalars(tmp_path / "run", "actors/restarts")[-1][1] == 1.0


@pytest.mark.slow
def test_slow_learner_keeps_inflight_work_bounded(tmp_path, ray_address):
    from muzero.builder import build_trainer

    # 2 actors x 2 calls: at most 4 calls out; each call is 5 moves x 2 games = 10 moves.
    config = _ray_config(num_actors=2, moves_per_call=5, max_inflight_per_actor=2)
    samples: list[tuple[int, int, int]] = []

    def slow_learner(batch):
        trainer = seen["trainer"]
        samples.append(
            (trainer.source.actors.inflight, trainer.state.counters["env_steps"], trainer.learner.training_step)
        )
        time.sleep(0.05)  # a step of ~50 ms: the actors play a call of 10 moves much faster
        return batch

    seen: dict = {}
    trainer = build_trainer(
        config, tmp_path / "run", SPEC, batch_hook=slow_learner, backend="ray", ray_address=ray_address
    )
    seen["trainer"] = trainer
    trainer.run()
    inflight = np.array([s[0] for s in samples])
    assert inflight.max() == 4  # the bound was reached (the actors were ahead) and never passed
    # Games are collected only when the learner has caught up (steps_per_move 0.5: T >= int(0.5 E)),
    # and then at most the 4 calls out come in: E <= 2 (T + 1) + 40 from then on. (Before the
    # first catch-up the moves of the warm-up, until replay.min_games, are ahead.)
    warm_up_moves = samples[0][1]
    caught_up = [(moves, step) for _, moves, step in samples if step >= int(0.5 * warm_up_moves)]
    assert len(caught_up) > 20
    moves_ahead = max(moves - 2 * step for moves, step in caught_up)
    assert moves_ahead <= 2 + 40, moves_ahead


@pytest.mark.slow
def test_calls_finished_while_the_learner_caught_up_are_results_not_hangs(tmp_path, ray_address, monkeypatch):
    import ray

    from muzero import actor_pool
    from muzero.builder import build_trainer

    # The driver collects only when the learner has caught up. On Freeway every first game
    # ends after 2,500 moves, 80,000 moves in all, and the learner then trained 8,000 steps
    # (400 s) before it collected: longer than actors.call_timeout_seconds (300). The actors'
    # calls had long finished, yet both actors were killed as hung and their games lost.
    # Here the driver's clock jumps past the timeout (the default, 300 s) while every call out
    # is finished: the calls are collected as results and no actor is restarted.
    config = _ray_config(training_steps=60, num_actors=2, moves_per_call=5)
    offset = [0.0]
    monkeypatch.setattr(actor_pool, "time", SimpleNamespace(time=lambda: time.time() + offset[0]))
    seen: dict = {}

    def look_away_at_step_20(batch):
        trainer = seen["trainer"]
        if trainer.learner.training_step == 20 and not offset[0]:
            refs = [call.ref for actor in trainer.source.actors.actors for call in actor.calls]
            finished, _ = ray.wait(refs, num_returns=len(refs), timeout=60)
            assert refs and len(finished) == len(refs)
            offset[0] = 301.0  # the timeout and a second
        return batch

    trainer = build_trainer(
        config, tmp_path / "run", SPEC, batch_hook=look_away_at_step_20, backend="ray", ray_address=ray_address
    )
    seen["trainer"] = trainer
    result = trainer.run()
    assert offset[0] == 301.0 and result["training_step"] == 60
    # The old code killed both actors here (2 restarts), losing the games in progress inside them.
    assert result["actor_restarts"] == 0


@pytest.mark.slow
def test_hung_actor_is_replaced_then_the_run_stops_below_min_live(tmp_path, ray_address):
    run_dir = tmp_path / "run"
    # One actor whose calls never end in time (a million moves against a 2 s timeout): it is
    # killed as hung, restarted once (max_restarts 1), killed again, and then 0 < 1 live actor.
    result = muzero(
        "train",
        "--config",
        TINY,
        "--logdir",
        str(run_dir),
        "--backend",
        "ray",
        "--ray-address",
        ray_address,
        "--set",
        "actors.num_actors=1",
        "--set",
        "actors.min_live_actors=1",
        "--set",
        "actors.max_restarts=1",
        "--set",
        "actors.moves_per_call=1000000",
        "--set",
        "actors.call_timeout_seconds=2",
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert "self-play actor 0 hung (a call ran over actors.call_timeout_seconds=2); restarted" in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last == (
        "muzero train: stopped: 0 of 1 self-play actors alive, fewer than actors.min_live_actors=1 "
        "(restarts used up: actors.max_restarts=1); final checkpoint "
        f"{run_dir / 'checkpoints' / 'ckpt-0'}"
    )
    assert complete_steps(run_dir / "checkpoints") == [0]
    assert _scalars(run_dir, "actors/restarts")[-1][1] == 1.0


@pytest.mark.slow
def test_reanalyse_actors_refresh_replay_and_are_restarted(tmp_path, ray_address):
    import ray

    from muzero.builder import build_trainer

    # One self-play actor, one reanalyse actor searching 8 positions per call, 8 per training
    # step; killed at step 40, after which the learner slows down until a new process has
    # answered (a restart takes a new worker process). 0.2 s a step, 32 s at most. Waiting on
    # the count of results instead raced: calls the old process had finished before the kill
    # were still collected after it, so the learner sped up again and the run could end before
    # the new process answered (CI, stop 48).
    config = _ray_config(training_steps=200, num_actors=1, moves_per_call=5, max_restarts=2).replace(
        reanalyse=ReanalyseConfig(
            fraction=0.8, positions_per_step=8, batch_size=8, num_actors=1, target_network_interval=10
        )
    )
    seen: dict = {}

    def kill_at_step_40(batch):
        trainer = seen["trainer"]
        pool = trainer.reanalyser.pool
        if trainer.learner.training_step == 40 and "answered" not in seen:
            seen["answered"] = pool.actors[0].results
            seen["process"] = pool.actors[0].process
            seen["reanalysed"] = trainer.replay_buffer.fraction_reanalysed()
            ray.kill(pool.actors[0].handle, no_restart=False)
        elif "answered" in seen and pool.actors[0].process == seen["process"]:
            time.sleep(0.2)
        return batch

    trainer = build_trainer(
        config, tmp_path / "run", SPEC, batch_hook=kill_at_step_40, backend="ray", ray_address=ray_address
    )
    seen["trainer"] = trainer
    assert trainer.run()["training_step"] == 200
    pool = trainer.reanalyser.pool
    assert seen["answered"] > 0 and seen["reanalysed"] > 0  # it worked before the kill
    # And after it: a new process answered, counted as the one restart.
    assert pool.restarts == 1 and pool.actors[0].process != seen["process"]
    assert pool.actors[0].results > seen["answered"]
    assert _scalars(tmp_path / "run", "reanalyse/actor_restarts")[-1][1] == 1.0
    # Reanalysed policy targets reached the learner's batches.
    assert max(value for _, value in _scalars(tmp_path / "run", "reanalyse/fraction_fresh")) > 0


@pytest.mark.parametrize(
    "num_actors, reanalyse, min_live, expected",
    [
        # 0 on an 8-core machine: one actor per core, 8; min_live_actors stays 1.
        (0, ReanalyseConfig(), 1, (8, 1)),
        # With 3 reanalyse actors on (fraction > 0): 8 - 3 = 5 self-play actors.
        (0, ReanalyseConfig(fraction=0.5, num_actors=3), 1, (5, 1)),
        # min_live_actors above the count made is cut to it: 8 - 7 = 1 actor, 1 needed alive.
        (0, ReanalyseConfig(fraction=0.5, num_actors=7), 4, (1, 1)),
        # A count in the config is kept.
        (3, ReanalyseConfig(), 2, (3, 2)),
    ],
)
def test_num_actors_0_is_one_per_core(monkeypatch, num_actors, reanalyse, min_live, expected):
    from muzero.builder import with_actor_count

    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    config = MuZeroConfig(actors=ActorsConfig(num_actors=num_actors, min_live_actors=min_live), reanalyse=reanalyse)
    actors = with_actor_count(config, ray_address=None).actors
    assert (actors.num_actors, actors.min_live_actors) == expected


def _last_games_count(log: Path) -> int:
    """The games in replay at the run's last progress line (0 before the first)."""
    counts = re.findall(r"\| games (\d+) \|", log.read_text())
    return int(counts[-1]) if counts else 0


@pytest.mark.slow
def test_sigkill_three_times_in_the_concurrent_loop_keeps_every_finished_game(tmp_path, ray_address):
    run_dir, checkpoints = tmp_path / "run", tmp_path / "run" / "checkpoints"
    # A checkpoint every 150 steps and a progress line every 0.1 s: games reach replay (and the
    # log) many times between two checkpoints, so a kill falls after games no checkpoint holds.
    settings = [
        "--backend",
        "ray",
        "--ray-address",
        ray_address,
        "--set",
        "train.training_steps=100000",
        "--set",
        "train.checkpoint_interval=150",
        "--set",
        "run.log_every_seconds=0.1",
        "--set",
        "actors.num_actors=1",
        "--set",
        "selfplay.num_envs=2",
    ]
    command = [sys.executable, "-m", "muzero.cli", "train"]

    def start(log: Path, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [*command, *args, *settings], env=_env(), cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT
        )

    process = start(tmp_path / "log0", "--config", TINY, "--logdir", str(run_dir))
    rng = np.random.default_rng(0)
    from_journal = resumed_with = 0
    for cycle in range(3):
        log = tmp_path / f"log{cycle}"
        deadline = time.time() + 180
        # A checkpoint, and games played since this run started (not only those it resumed with).
        while not complete_steps(checkpoints) or _last_games_count(log) <= resumed_with + 2:
            assert process.poll() is None and time.time() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        time.sleep(rng.uniform(0.5, 3.0))
        process.kill()  # SIGKILL
        process.wait()
        finished = _last_games_count(log)  # every one of them was in replay when the line was printed
        resumed = tmp_path / f"log{cycle + 1}"
        process = start(resumed, "--resume", str(run_dir))
        while not (
            match := re.search(r"resumed from .*ckpt-\d+ at training step \d+ \((\d+) games", resumed.read_text())
        ):
            assert process.poll() is None and time.time() < deadline + 120, resumed.read_text()[-3000:]
            time.sleep(0.1)
        resumed_with = int(match.group(1))
        assert resumed_with >= finished, (cycle, match.group(0), finished)
        from_journal += len(re.findall(r"games that finished after the checkpoint", resumed.read_text()))
    while _last_games_count(resumed) <= resumed_with:  # the resumed run goes on playing
        assert process.poll() is None and time.time() < deadline + 240, resumed.read_text()[-3000:]
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=120) == 0
    # The journal gave games back at least once: the kills did not all fall right after a checkpoint.
    assert from_journal >= 1
