"""Greedy evaluation of a network: during training (`Evaluator`) and of a run's checkpoint (`evaluate`).

Evaluation plays with no exploration noise and temperature 0, in its own environments
with its own RNG, so it never changes the training trajectory; both are checkpointed.
Each evaluation goes to TensorBoard (`eval/...`) and to `RUN_DIR/eval.csv`; with
`run.record_video`, one more greedy episode is recorded into RUN_DIR/videos/ (muzero/video.py).
"""

from __future__ import annotations

import csv
import io
import pickle
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from absl import logging

from muzero.config import GameConfig, MuZeroConfig, RunConfig
from muzero.envs import Environment, EnvironmentSpec, make_environments
from muzero.factories import make_run_network
from muzero.game import Game
from muzero.greedy import GreedyPlayer, make_greedy_player, with_eval_simulations
from muzero.networks.base import Network
from muzero.run_dir import CHECKPOINT_DIR, CONFIG_FILE, EVAL_FILE, OPPONENT_FILE, write_atomically
from muzero.video import EvaluationVideos, RecordingEnvironment, save_episodes

EVAL_COLUMNS = ["training_step", "env_steps", "games", "wall_seconds", "eval_seconds", "mean_return", "std_return"]
OPPONENT_COLUMNS = ["training_step", "env_steps", "wall_seconds", "opponent", "side", "games", "win", "draw", "loss"]


def evaluate_network(
    player: GreedyPlayer,
    network: Network,
    environments: list[Environment],
    episodes: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Returns of `episodes` greedy games (no exploration noise, temperature 0; `GreedyPlayer.play`)."""
    return np.array([game.episode_return() for game in player.play(network, environments, episodes, rng)])


class Evaluator:
    """Greedy evaluations every `run.eval_interval` training steps, into TensorBoard and eval.csv.

    Args:
      run: the `run` section (`eval_episodes`, `record_video`, `eval_opponents`, `eval_games`).
      game_config: the `game` section (the evaluation's environments, the recorded videos, the matches).
      run_dir: the run's folder (eval.csv).
      make_player: MuZero's greedy player for a number of games played at once
        (`functools.partial(muzero.greedy.make_greedy_player, config, spec)`).
      summaries: the run's TensorBoard writer.
      seed: the run's seed; evaluation environments and RNG derive their own from it.
    """

    def __init__(
        self,
        run: RunConfig,
        game_config: GameConfig,
        run_dir: Path,
        make_player: Callable[[int], GreedyPlayer],
        summaries,
        seed: int,
    ):
        self.run, self.game_config = run, game_config
        self.path = run_dir / EVAL_FILE
        self.summaries = summaries
        self.make_player = make_player
        episodes = run.eval_episodes
        self.videos = EvaluationVideos(game_config, run_dir, seed) if run.record_video else None
        # Side by side: the recorded episode is one more game of the batch.
        self.player = make_player(episodes + (self.videos is not None))
        self.environments = make_environments(game_config, episodes if self.player.side_by_side else 1, seed + 1)
        self.rng = np.random.default_rng([seed, 1])
        self.arena_player: GreedyPlayer | None = None  # made at the first match (`evaluate_against`)
        # The newest evaluation's (mean, std) of returns and its training step (-1: none yet).
        self.last: tuple[float, float] | None = None
        self.last_step = -1
        # A background evaluation (`evaluate_in_background`): its thread, and the RNG and
        # environments as they were when it started, which checkpoints take meanwhile.
        self.thread: threading.Thread | None = None
        self.held: tuple[np.random.Generator, list[Environment]] | None = None
        self.error: BaseException | None = None

    def checkpoint_state(self) -> tuple[np.random.Generator, list[Environment]]:
        """(RNG, environments) for a checkpoint: while a background evaluation runs, as they were
        when it started (a resumed run then plays that evaluation's episodes again)."""
        held = self.held
        return held if held is not None else (self.rng, self.environments)

    def evaluate_in_background(self, step: int, network: Network, counters: dict, games: int, wall: float) -> bool:
        """`evaluate` on a thread of its own, so that the learner and self-play go on (the concurrent
        loop). Returns False, and starts nothing, while the previous one still runs.

        Raises:
          Whatever the previous background evaluation raised.
        """
        if self.thread is not None and self.thread.is_alive():
            return False
        self.join()
        self.held = pickle.loads(pickle.dumps((self.rng, self.environments)))
        env_steps = counters["env_steps"]  # the network's: self-play goes on while it plays

        def run() -> None:
            try:
                self.evaluate(step, network, counters, games, wall, env_steps)
            except BaseException as error:  # noqa: BLE001 (raised on the loop's thread by `join`)
                self.error = error
            finally:
                self.held = None

        self.thread = threading.Thread(target=run, name=f"evaluation-{step}", daemon=True)
        self.thread.start()
        return True

    def join(self) -> None:
        """Waits for the background evaluation, if any; raises what it raised."""
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        error, self.error = self.error, None
        if error is not None:
            raise error

    def start_file(self) -> None:
        """A new eval.csv with its header (a fresh run)."""
        with open(self.path, "w", newline="") as f:
            csv.writer(f).writerow(EVAL_COLUMNS)

    def truncate_after(self, step: int) -> None:
        """Drops evaluations logged after `step` (they happened after the checkpoint resumed from).

        The evaluation at `step` itself stays where it is logged whole (eval.csv's row and a
        match against each of `run.eval_opponents`), and counts as the newest one (`last`,
        `last_step`): a run resumed after it ended plays no second final evaluation. Cut short
        (the process killed between its matches), its rows go too, and it is played again whole.
        """
        files = {self.path: EVAL_COLUMNS, self.path.with_name(OPPONENT_FILE): OPPONENT_COLUMNS}
        kept = {}
        for path in files:
            if path.is_file():
                with open(path, newline="") as f:
                    kept[path] = [row for row in csv.DictReader(f) if int(row["training_step"]) <= step]
        at_step = {path: [row for row in rows if int(row["training_step"]) == step] for path, rows in kept.items()}
        own = at_step.get(self.path, [])
        matched = {row["opponent"] for row in at_step.get(self.path.with_name(OPPONENT_FILE), [])}
        whole = bool(own) and matched >= set(self.run.eval_opponents)
        if whole:
            self.last = (float(own[-1]["mean_return"]), float(own[-1]["std_return"]))
            self.last_step = step
        for path, rows in kept.items():
            text = io.StringIO()
            writer = csv.DictWriter(text, fieldnames=files[path])
            writer.writeheader()
            writer.writerows(row for row in rows if whole or int(row["training_step"]) < step)
            write_atomically(path, text.getvalue())

    def evaluate(
        self, step: int, network: Network, counters: dict, games: int, wall: float, env_steps: int | None = None
    ) -> np.ndarray:
        """Plays `run.eval_episodes` greedy games with `network`; logs and returns their returns.

        `env_steps`: the self-play moves when `network` was taken (default: `counters`' now); the
        logs pair the returns with these, not with the moves played while the evaluation ran.
        """
        env_steps = counters["env_steps"] if env_steps is None else env_steps
        started = time.time()
        played = self._play(step, network)
        returns = np.array([game.episode_return() for game in played])
        seconds = time.time() - started
        counters["eval_seconds"] += seconds
        wall += seconds
        lengths = np.array([len(game) for game in played])
        self.summaries.scalars(
            step,
            {
                "eval/mean_return": returns.mean(),
                "eval/std_return": returns.std(),
                "eval/episode_length": lengths.mean(),
            },
        )
        # The same against environment steps (self-play moves so far), to compare runs by samples.
        self.summaries.scalars(env_steps, {"eval/mean_return_by_env_step": returns.mean()})
        with open(self.path, "a", newline="") as f:
            csv.writer(f).writerow(
                [
                    step,
                    env_steps,
                    games,
                    f"{wall:.1f}",
                    f"{counters['eval_seconds']:.1f}",
                    f"{returns.mean():.2f}",
                    f"{returns.std():.2f}",
                ]
            )
        logging.info(
            "eval at step %d: greedy return %.1f +- %.1f over %d episodes (%.0fs)",
            step,
            returns.mean(),
            returns.std(),
            len(returns),
            wall,
        )
        self.last, self.last_step = (float(returns.mean()), float(returns.std())), step
        for opponent in self.run.eval_opponents:
            self.evaluate_against(opponent, step, network, counters, wall, env_steps)
        return returns

    def _play(self, step: int, network: Network) -> list[Game]:
        """The scored greedy games, and the recorded one beside them (not scored, not checkpointed)."""
        episodes = self.run.eval_episodes
        recording = self.videos.environments(step) if self.videos is not None else []
        if self.player.side_by_side:
            environments = self.environments[:episodes] + recording
            played = self.player.play(network, environments, episodes + len(recording), self.rng)[:episodes]
        else:
            played = self.player.play(network, self.environments, episodes, self.rng)
            for environment in recording:  # its own RNG: the evaluation's stays as without videos
                self.player.play(network, [environment], 1, np.random.default_rng([step, 2]))
        if recording:
            self.videos.save(step)
        return played

    def evaluate_against(
        self, opponent: str, step: int, network: Network, counters: dict, wall: float, env_steps: int
    ) -> None:
        """`run.eval_games` games against `opponent` (muzero/arena.py), half as first player."""
        from muzero.arena import play_match

        started = time.time()
        games = self.run.eval_games
        if self.arena_player is None:  # one for all matches: the compiled search traces once
            self.arena_player = self.make_player(games)
        result = play_match(self.game_config, self.arena_player, network, opponent, games, seed=step)
        counters["eval_seconds"] += time.time() - started
        name = opponent.replace(":", "_")
        self.summaries.scalars(
            step, {f"eval/{name}/{outcome}": result.fraction(outcome) for outcome in ("win", "draw", "loss")}
        )
        path = self.path.with_name(OPPONENT_FILE)
        new = not path.is_file()
        with open(path, "a", newline="") as f:
            writer = csv.writer(f)
            if new:
                writer.writerow(OPPONENT_COLUMNS)
            for row in result.rows(opponent):
                writer.writerow([step, env_steps, f"{wall:.1f}", *row])
        logging.info(
            "eval at step %d against %s: %d wins, %d draws, %d losses in %d games (score %.2f)",
            step,
            opponent,
            result.total("win"),
            result.total("draw"),
            result.total("loss"),
            result.games(),
            result.score(),
        )


def load_run(
    run_dir: Path, num_simulations: int | None = None, step: int | None = None
) -> tuple[MuZeroConfig, EnvironmentSpec, Network, int]:
    """A run's config, game and newest complete network, or the one at `step` (read only: no lock,
    nothing written).

    Args:
      run_dir: the run folder `muzero train` wrote.
      num_simulations: the search budget to evaluate with instead of the run's
        (None: its `run.eval_simulations` when set, else its `search.num_simulations`).
      step: the training step of the checkpoint to load (None: the newest that loads); older
        ones are there when `run.keep_checkpoint_every_steps` kept them.

    Returns:
      (config, spec, network as self-play runs it, training step of the checkpoint).
    """
    config, spec, network, step, _ = restore_run(run_dir, num_simulations, step)
    return config, spec, network.published_network(step), step


def restore_run(
    run_dir: Path, num_simulations: int | None = None, step: int | None = None
) -> tuple[MuZeroConfig, EnvironmentSpec, Network, int, dict]:
    """`load_run`'s checkpoint as it is restored: (config, spec, the learner's Keras network,
    training step, the checkpoint's state: replay and the rest), for probes that run the network
    outside a search or read the replay. Arguments as `load_run`'s."""
    from muzero.checkpoints import Checkpointer
    from muzero.config_loader import load_config
    from muzero.envs import check_environment

    config = with_eval_simulations(load_config(run_dir / CONFIG_FILE), num_simulations)
    spec = check_environment(config.game)
    network = make_run_network(config, spec)
    step, state = Checkpointer(run_dir / CHECKPOINT_DIR, network, optimizer=None).restore(step)
    return config, spec, network, step, state


def evaluate(
    run_dir: Path,
    episodes: int,
    seed: int = 12345,
    video_dir: Path | None = None,
    num_simulations: int | None = None,
    step: int | None = None,
) -> tuple[np.ndarray, int]:
    """Greedy episodes with the run's newest complete checkpoint (or the one at `step`); returns
    (returns, training step).

    With `video_dir`, every episode is also recorded as VIDEO_DIR/episode-<i>.mp4 (muzero/video.py).
    `num_simulations` replaces the run's search budget and `step` picks the checkpoint (`load_run`).

    Raises:
      VideoUnavailable: `video_dir` given and the game cannot be recorded (or no encoder).
    """
    config, spec, network, step = load_run(run_dir, num_simulations, step)
    player = make_greedy_player(config, spec, episodes)
    environments = make_environments(config.game, episodes if player.side_by_side else 1, seed)
    if video_dir is not None:
        environments = [RecordingEnvironment(environment) for environment in environments]
    rng = np.random.default_rng(seed)
    returns = evaluate_network(player, network, environments, episodes, rng)
    if video_dir is not None:
        save_episodes(environments, video_dir)
    return returns, step
