"""What `muzero train`, `muzero evaluate` and `muzero play` do once `muzero.cli` has read
the flags.

Every check on user input (flags, YAML, environment id, run directory) runs before
TensorFlow is imported (`muzero.tf_runtime.load_tensorflow`); a problem is a `UsageError`,
`ConfigError` or `RunDirError`, which the CLI prints as one line with exit status 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

from absl import logging

from muzero.config import MuZeroConfig
from muzero.config_io import config_to_yaml
from muzero.config_loader import config_changes, load_config
from muzero.envs import EnvironmentSpec, EnvironmentSpecError, check_config_environment, check_environment
from muzero.progress import log_to_file
from muzero.run_dir import (
    BACKEND_FILE,
    CHECKPOINT_DIR,
    CONFIG_FILE,
    LOG_FILE,
    check_finished_run,
    check_new_run_dir,
    check_resumable,
    check_writable,
    new_default_run_dir,
    prepare_run_dir,
    recorded_backend,
)
from muzero.tf_runtime import load_tensorflow

EXIT_STOPPED = 1
DEFAULT_CONFIG = "configs/cartpole.yaml"


class UsageError(Exception):
    """Bad input found by the CLI; printed as one line, exit status 2."""


def command_train(args: argparse.Namespace) -> int:
    """`muzero train`: the flags, the config, the game and the run folder checked, then the
    run (`muzero.builder.train`). Returns the exit status."""
    backend_note = None
    if args.resume is not None:
        args.backend, backend_note = resume_backend(Path(args.resume), args.backend, args.ray_address)
    _check_backend(args)
    if args.step is not None and args.resume is None:
        raise UsageError("--step: only with --resume")
    if args.resume is not None:
        if args.logdir is not None:
            raise UsageError("--logdir and --resume: give one (a resumed run stays in its own directory)")
        logdir, config = _resume_config(Path(args.resume), args)
        where = " + ".join(args.config or [str(logdir / CONFIG_FILE)])
    else:
        config_paths = args.config or [DEFAULT_CONFIG]
        config = load_config(config_paths, args.set)
        where = " + ".join(config_paths)
    try:
        spec = check_config_environment(config)
        if config.run.eval_opponents:
            from muzero.arena import check_opponents

            check_opponents(config.game, config.run.eval_opponents)
    except EnvironmentSpecError as error:
        raise UsageError(f"{_blame(args.set, error.key, where)}: {error.key}: {error}") from None
    memory = _check_memory(config, spec, args)
    if args.print_config:  # a dry run: everything above is checked, nothing is written
        if args.logdir is not None:
            check_new_run_dir(Path(args.logdir))
        print(config_to_yaml(config), end="")
        return 0
    if args.resume is not None:
        check_writable(logdir)
    elif args.logdir:
        logdir = Path(args.logdir)
        prepare_run_dir(logdir)
    else:
        logdir = new_default_run_dir(config_paths[-1])
    log_to_file(logdir / LOG_FILE)
    logging.info(memory)
    if backend_note is not None:
        logging.log(*backend_note)

    load_tensorflow()
    from muzero.actors import ClusterError
    from muzero.builder import train
    from muzero.checkpoints import CheckpointError
    from muzero.runner import RunStopped

    logging.info("run directory %s; watch it with: tensorboard --logdir %s", logdir, logdir.parent)
    try:
        result = train(
            config,
            logdir,
            spec,
            resume=args.resume is not None,
            backend=resolve_backend(args.backend, args.ray_address),
            ray_address=args.ray_address,
            resume_step=args.step,
        )
    except (CheckpointError, ClusterError) as error:
        raise UsageError(str(error)) from None
    except RunStopped as error:
        print(f"muzero train: stopped: {error}", file=sys.stderr)
        return EXIT_STOPPED
    if result["stopped_by"]:
        logging.info(
            "stopped by %s at training step %d with a final checkpoint; continue with: muzero train --resume %s",
            result["stopped_by"],
            result["training_step"],
            logdir,
        )
        return 0
    if result["out_of_time"]:
        logging.info(
            "run.time_limit_minutes (%g) reached at training step %d, with a final checkpoint; train on with: "
            "muzero train --resume %s --set run.time_limit_minutes=MORE",
            config.run.time_limit_minutes,
            result["training_step"],
            logdir,
        )
    logging.info(
        "done: %d training steps, %d games, %d moves in %.0fs; greedy return %.1f +- %.1f",
        result["training_step"],
        result["games"],
        result["env_steps"],
        result["wall_seconds"],
        result["mean_return"],
        result["std_return"],
    )
    if "games_by_actor" in result:
        logging.info(
            "self-play actors: %d restarts; games per actor: %s",
            result["actor_restarts"],
            " ".join(map(str, result["games_by_actor"])),
        )
    return 0


def _check_memory(config: MuZeroConfig, spec: EnvironmentSpec, args: argparse.Namespace) -> str:
    """The run's memory estimate against the limit (`muzero.memory`), before anything heavy is
    done or written; returns the line to log. Counts a process per self-play actor when the
    back end will be Ray."""
    from muzero.memory import available_memory, estimate_memory, gib, memory_problem

    processes = 1
    # A cluster's actors use their own machines' memory.
    local_ray = backend_choice(args.backend, args.ray_address)[0] == "ray" and args.ray_address is None
    if local_ray:
        processes += config.actors.num_actors or os.cpu_count() or 1
    available = available_memory()
    problem = memory_problem(config, spec, available, processes, local_ray)
    if problem is not None:
        raise UsageError(problem)
    estimate = estimate_memory(config, spec, processes, local_ray).describe()
    return f"memory: up to {estimate} estimated; available: {gib(available) if available else 'unknown'}"


def _blame(overrides: list[str], key: str, where: str) -> str:
    """ "--set KEY=VALUE" when the last --set touching `key` (it, a key inside it or a section
    holding it) set it, else `where` (the config files)."""
    for override in reversed(overrides):
        path = override.partition("=")[0].strip()
        if path == key or path.startswith(key + ".") or key.startswith((path + ".", path + "[")):
            return f"--set {override}"
    return where


def backend_choice(backend: str, ray_address: str | None) -> tuple[str, str]:
    """(the back end --backend means, why): auto is "ray" (concurrent self-play) when Ray is
    installed and the machine has 2 cores or more (or a cluster is named), else "local"."""
    if backend != "auto":
        return backend, f"--backend {backend}"
    cores = os.cpu_count() or 1
    if ray_address is None and importlib.util.find_spec("ray") is None:
        return "local", "Ray is not installed; pip install -e '.[ray]' for concurrent self-play"
    if ray_address is None and cores < 2:
        return "local", "one core: self-play and the learner take turns"
    where = ray_address or f"this machine's {cores} cores"
    return (
        "ray",
        f"self-play actors beside the learner on {where}; --backend local for the bit-reproducible interleaved loop",
    )


def resolve_backend(backend: str, ray_address: str | None) -> str:
    """`backend_choice`'s back end, the choice logged when it was --backend auto's."""
    chosen, why = backend_choice(backend, ray_address)
    if backend == "auto":
        logging.info("back end: %s (%s)", chosen, why)
    return chosen


def resume_backend(run_dir: Path, backend: str, ray_address: str | None) -> tuple[str, tuple[int, str] | None]:
    """The --backend a resume of `run_dir` runs with: auto becomes the back end the run last
    trained on (RUN_DIR/backend.txt), so that a run started with `--backend local` resumes
    exactly without the flag.

    Args:
      run_dir: the run being resumed.
      backend: --backend as given ("auto", "local" or "ray").
      ray_address: --ray-address as given.

    Returns:
      The back end flag to use, and the absl level and line to log: the choice, or a warning
      when Ray is named for a run that trained on the exact local loop. A run from before
      the file keeps the flag as given (auto resolves as ever), with nothing to log.
    """
    recorded = recorded_backend(run_dir)
    if recorded is None:
        return backend, None
    if backend == "auto" and ray_address is None:
        if recorded == "ray" and importlib.util.find_spec("ray") is None:
            return backend, None  # auto falls back to local and says why
        return recorded, (
            logging.INFO,
            f"back end: {recorded} (the run's own, {run_dir / BACKEND_FILE}; --backend to change)",
        )
    if recorded == "local" and backend != "local":  # --backend ray, or auto with --ray-address
        return backend, (
            logging.WARNING,
            "back end: ray, where the run trained on local until now: this resume is not bit-exact",
        )
    return backend, None


def _check_backend(args: argparse.Namespace) -> None:
    """--backend / --ray-address, checked without importing Ray (or waiting minutes on ray.init)."""
    if args.ray_address is not None and args.backend == "local":
        raise UsageError("--ray-address: only with --backend ray or auto")
    if args.backend == "ray" and importlib.util.find_spec("ray") is None:
        raise UsageError("--backend ray: Ray is not installed: pip install -e '.[ray]' (or make install)")
    if args.ray_address is not None:
        from muzero.actors import ClusterError, check_address

        try:
            check_address(args.ray_address)
        except ClusterError as error:
            raise UsageError(str(error)) from None


def _resume_config(run_dir: Path, args: argparse.Namespace):
    """The config to resume `run_dir` with: its saved config (or --config) plus --set.

    A changed network shape is refused, naming the variables that differ, and so is a changed
    optimizer; other changes are allowed and printed as a diff against the saved config.
    """
    from muzero.networks.compat import shape_changes

    # Held before anything is printed: a run still writing here is the one message.
    steps = check_resumable(run_dir, hold=not args.print_config)
    _check_step(args.step, run_dir, steps)
    saved = load_config(run_dir / CONFIG_FILE)
    config = load_config(args.config or [run_dir / CONFIG_FILE], args.set)
    differ = shape_changes(_network_shapes(saved), _network_shapes(config))
    if differ:
        raise UsageError(f"{run_dir}: cannot resume with a different network shape: {'; '.join(differ)}")
    if config.train.optimizer != saved.train.optimizer:  # the checkpoints hold the saved optimizer's slots
        raise UsageError(
            f"{run_dir}: cannot resume with train.optimizer {config.train.optimizer!r}: its checkpoints hold "
            f"{saved.train.optimizer!r}'s slots (start a new run)"
        )
    if not args.print_config:
        log_to_file(run_dir / LOG_FILE)  # appended to: the resumed run's lines follow the first run's
    for key, (old, new) in config_changes(saved, config).items():
        logging.info("config changed on resume: %s: %r -> %r", key, old, new)
    return run_dir, config


def _check_step(step: int | None, run_dir: Path, steps) -> None:
    """`--step N` names one of `steps`, the run's complete checkpoints, or one line lists them."""
    if step is not None and step not in steps:
        raise UsageError(
            f"--step {step}: no complete checkpoint at that step in {run_dir / CHECKPOINT_DIR} "
            f"(complete: {', '.join(map(str, sorted(steps)))})"
        )


def _network_shapes(config) -> dict:
    """`muzero.networks.compat.network_shapes` of the network `config` builds for its game."""
    from muzero.networks.compat import network_shapes

    return network_shapes(config.network, check_environment(config.game), config.game.stacked_frames)


def _check_run_dir(run_dir: Path, step: int | None = None):
    """A finished or running run to read from (no lock taken), with a complete checkpoint at
    `step` when given; returns its config."""
    _check_step(step, run_dir, check_finished_run(run_dir))
    return load_config(run_dir / CONFIG_FILE)


def _board_game(config, run_dir: Path, what: str):
    """The run's OpenSpiel environment (muzero.arena.board_game), or one line naming what it plays."""
    from muzero.arena import OpponentError, board_game

    try:
        return board_game(config.game)
    except OpponentError:
        raise UsageError(
            f"{what}: only for two-player board games (game.id openspiel:...); {run_dir} plays {config.game.id}"
        ) from None


def command_evaluate(args: argparse.Namespace) -> int:
    """`muzero evaluate`: greedy episodes, or a match against `--opponent`. Returns the exit status."""
    run_dir = Path(args.run)
    if args.episodes < 1:
        raise UsageError(f"--episodes: expected an integer >= 1, got {args.episodes}")
    if args.games < 2:
        raise UsageError(f"--games: expected an integer >= 2, got {args.games}")
    _check_simulations(args)
    config = _check_run_dir(run_dir, args.step)
    if args.opponent is not None:
        return _evaluate_against(args, run_dir, config)
    video_dir = _video_dir(args)

    load_tensorflow()
    from muzero.checkpoints import CheckpointError
    from muzero.evaluation import evaluate
    from muzero.video import VideoUnavailable

    try:
        returns, step = evaluate(run_dir, args.episodes, args.seed, video_dir, args.simulations, args.step)
    except CheckpointError as error:
        raise UsageError(str(error)) from None
    except VideoUnavailable as error:
        raise UsageError(f"--video: {error}") from None
    print(
        f"mean return {returns.mean():.1f} +- {returns.std():.1f} over {len(returns)} greedy episodes "
        f"(checkpoint at training step {step})"
    )
    if video_dir is not None:
        print(f"videos of the {len(returns)} episodes: {video_dir}/episode-<i>.mp4")
    return 0


def _video_dir(args: argparse.Namespace) -> Path | None:
    """`--video DIR` made and checked writable, or None without it; one line when it cannot be."""
    if args.video is None:
        return None
    video_dir = Path(args.video)
    if video_dir.exists() and not video_dir.is_dir():
        raise UsageError(f"--video {video_dir}: exists and is not a directory")
    try:
        video_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"--video {video_dir}: cannot create the directory ({error.strerror})") from None
    check_writable(video_dir)
    return video_dir


def _evaluate_against(args: argparse.Namespace, run_dir: Path, config) -> int:
    """`evaluate --opponent`: a win/draw/loss table per side, printed and written as CSV; with
    `--video DIR`, every game of the match as a video."""
    from muzero.arena import OpponentError, check_match_videos, make_opponent, play_match, save_match_videos
    from muzero.match_report import match_csv_path, match_table, write_match_csv
    from muzero.video import VideoUnavailable

    environment = _board_game(config, run_dir, "--opponent")
    try:  # the opponent's name (and whether the game can be solved) before TensorFlow loads
        make_opponent(args.opponent, environment.game, args.seed)
    except OpponentError as error:
        raise UsageError(f"--opponent: {error}") from None
    if args.video is not None:
        try:  # whether the board can be drawn and written, before the match
            check_match_videos(environment, Path(args.video))
        except VideoUnavailable as error:
            raise UsageError(f"--video: {error}") from None
    video_dir = _video_dir(args)

    load_tensorflow()
    from muzero.checkpoints import CheckpointError
    from muzero.evaluation import load_run
    from muzero.greedy import make_greedy_player

    try:
        config, spec, network, step = load_run(run_dir, args.simulations, args.step)
    except CheckpointError as error:
        raise UsageError(str(error)) from None
    player = make_greedy_player(config, spec, args.games)
    result = play_match(config.game, player, network, args.opponent, args.games, args.seed)
    simulations = config.search.num_simulations
    print(match_table(result, args.opponent, step, simulations))
    path = Path(args.csv) if args.csv else match_csv_path(run_dir, args.opponent)
    try:
        write_match_csv(path, result, args.opponent, step, simulations)
    except OSError as error:
        raise UsageError(f"{path}: cannot write the table ({error.strerror})") from None
    print(f"written to {path}")
    if video_dir is not None:
        try:
            videos = save_match_videos(result, config.game, video_dir)
        except (VideoUnavailable, OSError) as error:
            raise UsageError(f"--video {video_dir}: {getattr(error, 'strerror', None) or error}") from None
        print(f"videos of the {len(videos)} games: {video_dir}/game-<i>-<side>-<outcome>{videos[0].suffix}")
    return 0


def command_play(args: argparse.Namespace) -> int:
    """`muzero play`: a board game against the run's agent on the terminal. Returns the exit status."""
    run_dir = Path(args.run)
    _check_simulations(args)
    config = _check_run_dir(run_dir, args.step)
    _board_game(config, run_dir, "play")

    load_tensorflow()
    from muzero.checkpoints import CheckpointError
    from muzero.evaluation import load_run
    from muzero.greedy import make_greedy_player
    from muzero.play import play

    try:
        config, spec, network, _ = load_run(run_dir, args.simulations, args.step)
    except CheckpointError as error:
        raise UsageError(str(error)) from None
    try:
        play(config.game, make_greedy_player(config, spec, 1), network, args.human_first, sys.stdin, sys.stdout)
    except (EOFError, KeyboardInterrupt):
        print("\ngame abandoned", file=sys.stderr)
        return EXIT_STOPPED
    return 0


def _check_simulations(args: argparse.Namespace) -> None:
    if args.simulations is not None and args.simulations < 1:
        raise UsageError(f"--simulations: expected an integer >= 1, got {args.simulations}")
