"""The training run: self-play and learner in one process, plus greedy evaluation.

The pseudocode runs actors (`run_selfplay`) and the learner (`train_network`)
concurrently, talking through `SharedStorage` (networks) and `ReplayBuffer`
(games). Here they alternate in one process: play one game with the newest
published network, save it, then train until the number of training steps
reaches `train.steps_per_move` times the moves played so far. The pieces only
exchange plain data (games, numpy weights), so they can later run apart.
"""

from __future__ import annotations

import csv
import os
import time
from collections import deque
from pathlib import Path

import numpy as np
from absl import logging

from muzero.config import MuZeroConfig
from muzero.config_io import config_to_yaml
from muzero.environment import Environment
from muzero.network import Network
from muzero.replay import ReplayBuffer
from muzero.selfplay import play_game
from muzero.storage import SharedStorage

CONFIG_FILE = "config.yaml"
CHECKPOINT_DIR = "checkpoints"
EVAL_FILE = "eval.csv"


def seed_everything(seed: int) -> np.random.Generator:
    import keras

    keras.utils.set_random_seed(seed)  # Python, numpy and TensorFlow global seeds.
    return np.random.default_rng(seed)


def write_atomically(path: Path, text: str) -> None:
    """Writes `text` to `path` through a temporary file and a rename."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def evaluate_network(config: MuZeroConfig, network: Network, environment: Environment, episodes: int,
                     rng: np.random.Generator) -> np.ndarray:
    """Returns of `episodes` greedy games (no exploration noise, temperature 0)."""
    return np.array([play_game(config, network, environment, rng, greedy=True).episode_return()
                     for _ in range(episodes)])


class _Progress:
    """Rates and recent returns for the progress line and TensorBoard."""

    def __init__(self):
        self.start = self.last_print = time.time()
        self.returns: deque[float] = deque(maxlen=20)
        self.selfplay_seconds = 0.0
        self.train_seconds = 0.0
        self.moves = 0
        self.steps_at_print, self.moves_at_print = 0, 0


def train(config: MuZeroConfig, run_dir: Path, observation_shape: tuple[int, ...]) -> dict:
    """Trains until `train.training_steps`; returns the final evaluation and counters.

    Args:
      config: validated configuration.
      run_dir: created and writable; receives config.yaml, TensorBoard events,
        checkpoints/ and eval.csv.
      observation_shape: the environment's observation shape.
    """
    from muzero.checkpoints import Checkpointer
    from muzero.models import MLPNetwork
    from muzero.summaries import Summaries
    from muzero.training import Learner

    rng = seed_everything(config.run.seed)
    observation_size = int(np.prod(observation_shape))
    environment = Environment(config.game.id, config.run.seed)
    eval_environment = Environment(config.game.id, config.run.seed + 1)
    network = MLPNetwork(config, observation_size)
    learner = Learner(config, network, observation_size)
    storage = SharedStorage(config.action_space_size)
    replay_buffer = ReplayBuffer(config, rng)
    checkpointer = Checkpointer(run_dir / CHECKPOINT_DIR, network, learner.optimizer, config.run.max_checkpoints)
    summaries = Summaries(str(run_dir))
    config_text = config_to_yaml(config)
    write_atomically(run_dir / CONFIG_FILE, config_text)
    summaries.text("config", "```\n" + config_text + "\n```")
    eval_path = run_dir / EVAL_FILE
    with open(eval_path, "w", newline="") as f:
        csv.writer(f).writerow(["training_step", "env_steps", "games", "wall_seconds", "mean_return", "std_return"])

    train_cfg = config.train
    storage.save_network(0, network)
    progress = _Progress()
    last_metrics: dict[str, float] = {}
    last_eval = None

    def run_eval(step: int) -> np.ndarray:
        returns = evaluate_network(config, storage.latest_network(), eval_environment, config.run.eval_episodes, rng)
        wall = time.time() - progress.start
        summaries.scalars(step, {"eval/mean_return": returns.mean(), "eval/std_return": returns.std()})
        with open(eval_path, "a", newline="") as f:
            csv.writer(f).writerow([step, progress.moves, replay_buffer.games_saved, f"{wall:.1f}",
                                    f"{returns.mean():.2f}", f"{returns.std():.2f}"])
        logging.info("eval at step %d: greedy return %.1f +- %.1f over %d episodes (%.0fs)",
                     step, returns.mean(), returns.std(), len(returns), wall)
        return returns

    def publish(step: int) -> None:
        storage.save_network(step, network)
        checkpointer.save(step, replay_buffer.games_saved, progress.moves)

    while learner.training_step < train_cfg.training_steps:
        # Self-play: one game with the newest published network.
        started = time.time()
        game = play_game(config, storage.latest_network(), environment, rng)
        seconds = time.time() - started
        progress.selfplay_seconds += seconds
        replay_buffer.save_game(game)
        progress.moves += len(game)
        progress.returns.append(game.episode_return())
        step = learner.training_step
        summaries.scalars(step, {
            "selfplay/episode_return": game.episode_return(),
            "selfplay/episode_length": len(game),
            "selfplay/moves_per_sec": len(game) / max(seconds, 1e-9),
            "replay/games": len(replay_buffer),
            "replay/games_saved": replay_buffer.games_saved,
            "selfplay/env_steps": progress.moves,
            "mcts/root_value": float(np.mean(game.root_values)),
        })

        # Learner: catch up with the training-steps-per-move ratio.
        if len(replay_buffer) >= config.replay.min_games:
            target = min(int(progress.moves * train_cfg.steps_per_move), train_cfg.training_steps)
            started = time.time()
            steps_before = learner.training_step
            while learner.training_step < target:
                batch = replay_buffer.sample_batch(train_cfg.num_unroll_steps, train_cfg.td_steps)
                last_metrics = learner.train_step(batch)
                step = learner.training_step
                if step % 10 == 0 or step == target or any(name.startswith("grad/") for name in last_metrics):
                    summaries.scalars(step, last_metrics)
                    summaries.scalars(step, {"train/lr": float(learner.optimizer.learning_rate)})
                if step % train_cfg.checkpoint_interval == 0:
                    publish(step)
                if config.run.eval_interval and step % config.run.eval_interval == 0:
                    last_eval = run_eval(step)
            seconds = time.time() - started
            progress.train_seconds += seconds
            if learner.training_step > steps_before:
                summaries.scalars(learner.training_step, {
                    "train/steps_per_sec": (learner.training_step - steps_before) / max(seconds, 1e-9)})

        now = time.time()
        if now - progress.last_print >= config.run.log_every_seconds:
            _print_progress(config, progress, learner.training_step, replay_buffer, last_metrics, now)

    step = learner.training_step
    publish(step)
    if last_eval is None or not (config.run.eval_interval and step % config.run.eval_interval == 0):
        last_eval = run_eval(step)
    summaries.close()
    return {"training_step": step, "games": replay_buffer.games_saved, "env_steps": progress.moves,
            "mean_return": float(last_eval.mean()), "std_return": float(last_eval.std()),
            "wall_seconds": time.time() - progress.start}


def _print_progress(config: MuZeroConfig, progress: _Progress, step: int, replay_buffer: ReplayBuffer,
                    metrics: dict, now: float) -> None:
    interval = now - progress.last_print
    steps_rate = (step - progress.steps_at_print) / interval
    moves_rate = (progress.moves - progress.moves_at_print) / interval
    recent = np.mean(progress.returns) if progress.returns else float("nan")
    loss = (f"loss {metrics['loss/total']:.3f} (v {metrics['loss/value']:.3f} r {metrics['loss/reward']:.3f} "
            f"p {metrics['loss/policy']:.3f})") if metrics else "loss -"
    logging.info("step %d/%d | games %d | moves %d | return(last %d) %.1f | %s | %.0f moves/s %.1f steps/s | %.0fs",
                 step, config.train.training_steps, replay_buffer.games_saved, progress.moves,
                 len(progress.returns), recent, loss, moves_rate, steps_rate, now - progress.start)
    progress.last_print, progress.steps_at_print, progress.moves_at_print = now, step, progress.moves


def evaluate(run_dir: Path, episodes: int, seed: int = 12345) -> tuple[np.ndarray, int]:
    """Greedy episodes with the run's latest checkpoint; returns (returns, training step)."""
    from muzero.checkpoints import Checkpointer
    from muzero.config_io import load_config
    from muzero.models import MLPNetwork

    config = load_config(run_dir / CONFIG_FILE)
    environment = Environment(config.game.id, seed)
    observation_size = int(np.prod(environment.observation_shape))
    network = MLPNetwork(config, observation_size)
    checkpointer = Checkpointer(run_dir / CHECKPOINT_DIR, network, optimizer=None)
    if checkpointer.restore_latest(expect_partial=True) is None:
        raise FileNotFoundError(f"{run_dir / CHECKPOINT_DIR}: no checkpoint found")
    step = int(checkpointer.step.numpy())
    rng = np.random.default_rng(seed)
    return evaluate_network(config, network.numpy_network(step), environment, episodes, rng), step
