"""Command line: `muzero train`, `muzero evaluate` and `muzero play`.

Every check on user input (flags, YAML, environment id, run directory) runs before
TensorFlow is imported, and a failure is one line on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging as std_logging
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from absl import app, logging
from absl.flags import argparse_flags

from muzero.config_io import BUILTIN_DEFAULTS, ConfigError, config_to_yaml, load_config
from muzero.progress import log_to_file
from muzero.run_dir import (
    CHECKPOINT_DIR,
    CONFIG_FILE,
    LOCK_FILE,
    LOG_FILE,
    RunDirInUse,
    complete_steps,
    create_run_dir,
    lock_run_dir,
)

EXIT_USAGE = 2
EXIT_STOPPED = 1
DEFAULT_CONFIG = "configs/cartpole.yaml"


class UsageError(Exception):
    """Bad input found by the CLI; printed as one line, exit status 2."""


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM before the training loop takes over the signals (start-up: TensorFlow
    loading, a checkpoint being restored); a KeyboardInterrupt, so Ctrl-C handlers still catch it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _interrupt(signum: int, frame) -> None:
    raise Interrupted(signum)


def parse_flags(argv: list[str]) -> argparse.Namespace:
    # allow_abbrev=False: absl's own flags (--run_with_pdb, ...) must not make --run ambiguous.
    parser = argparse_flags.ArgumentParser(
        prog="muzero", description="MuZero trainer (TensorFlow 2).", allow_abbrev=False
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=argparse.ArgumentParser)

    train = commands.add_parser("train", help="train from a YAML config")
    train.add_argument(
        "--config",
        action="append",
        default=None,
        metavar="YAML",
        help=f"YAML config file, or '{BUILTIN_DEFAULTS}' for the built-in defaults (default: "
        f"{DEFAULT_CONFIG}, or the run's own config with --resume); repeatable: the files "
        "merge in order, later keys overriding earlier ones, sections merged key by key. "
        "A relative path not found here is looked up in the muzero source tree, so the "
        "shipped configs/ are found from any folder",
    )
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set train.batch_size=64 (repeatable; applied after every --config)",
    )
    train.add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved config as YAML and exit: a dry run that checks the config, the "
        "environment and the flags, and writes nothing",
    )
    train.add_argument(
        "--logdir", default=None, help="run directory (default: runs/<config name>-<date-time>); must be new or empty"
    )
    train.add_argument(
        "--resume",
        default=None,
        metavar="RUN_DIR",
        help="continue RUN_DIR from its newest complete checkpoint (same step counter, "
        "learning-rate position, replay contents and TensorBoard run)",
    )
    train.add_argument(
        "--step",
        type=int,
        default=None,
        metavar="N",
        help="with --resume: continue from the complete checkpoint at training step N instead; "
        "the newer ones are moved to RUN_DIR/checkpoints/set-aside-<date-time>/",
    )
    train.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="where self-play runs: 'local' (this process, default) or 'ray' (actors.num_actors "
        "self-play actors on Ray; the learner stays here)",
    )
    train.add_argument(
        "--ray-address",
        default=None,
        metavar="HOST:PORT",
        help="with --backend ray: join this cluster (`ray start --head` prints it); default: start a local one",
    )

    evaluate = commands.add_parser("evaluate", help="greedy episodes with a run's latest checkpoint")
    evaluate.add_argument("--run", required=True, help="run directory written by `muzero train`")
    evaluate.add_argument("--episodes", type=int, default=10, help="number of episodes (default: %(default)s)")
    evaluate.add_argument("--seed", type=int, default=12345, help="environment seed (default: %(default)s)")
    evaluate.add_argument(
        "--opponent",
        default=None,
        metavar="random|perfect|mcts:N",
        help="two-player games: play --games games against this opponent, half as first player, "
        "and print (and write as CSV) the wins, draws and losses per side",
    )
    evaluate.add_argument("--games", type=int, default=100, help="games against --opponent (default: %(default)s)")
    evaluate.add_argument(
        "--csv",
        default=None,
        metavar="PATH",
        help="with --opponent: the table as CSV (default: RUN/match-<opponent>.csv)",
    )
    evaluate.add_argument(
        "--video",
        default=None,
        metavar="DIR",
        help="record every greedy episode as DIR/episode-<i>.mp4 (games that draw themselves: "
        "Atari, MinAtar, CartPole with pygame)",
    )
    _add_simulations(evaluate)

    play = commands.add_parser("play", help="play a two-player board game against a run's agent in the terminal")
    play.add_argument("--run", required=True, help="run directory written by `muzero train`")
    side = play.add_mutually_exclusive_group()
    side.add_argument("--first", dest="human_first", action="store_true", default=True, help="you move first (default)")
    side.add_argument("--second", dest="human_first", action="store_false", help="MuZero moves first")
    _add_simulations(play)
    return parser.parse_args(argv[1:])


def _add_simulations(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--simulations",
        type=int,
        default=None,
        metavar="N",
        help="search with N simulations per move instead of the run's search.num_simulations "
        "(a bigger budget at evaluation than in self-play, as the paper's board-game matches)",
    )


def _check_simulations(args: argparse.Namespace) -> None:
    if args.simulations is not None and args.simulations < 1:
        raise UsageError(f"--simulations: expected an integer >= 1, got {args.simulations}")


def prepare_run_dir(logdir: Path) -> None:
    """Creates `logdir` and makes this process its owner, refusing one that holds files, is in
    use by another process or cannot be written."""
    if logdir.exists() and not logdir.is_dir():
        raise UsageError(f"{logdir}: run directory path exists and is not a directory")
    # No lock file is left in a folder of someone else's files; in a run's folder the lock
    # comes first, so that a run still writing there is the one named.
    if not (logdir / LOCK_FILE).exists():
        _check_empty(logdir)
    try:
        logdir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"{logdir}: cannot write run directory ({error.strerror})") from None
    _hold(logdir)
    _check_empty(logdir)
    _check_writable(logdir)


def _check_logdir(logdir: Path) -> None:
    """--logdir checked as `prepare_run_dir` would, creating nothing (`--print-config`)."""
    if logdir.exists() and not logdir.is_dir():
        raise UsageError(f"{logdir}: run directory path exists and is not a directory")
    _check_empty(logdir)


def _check_empty(run_dir: Path) -> None:
    if run_dir.is_dir() and any(entry.name != LOCK_FILE for entry in run_dir.iterdir()):
        raise UsageError(f"{run_dir}: run directory already holds files; choose a new --logdir")


def _new_run_dir(config_path: str) -> Path:
    """runs/<config name>-<date-time>, created exclusively (-2, -3, ... when runs start in the same second)."""
    try:
        logdir = create_run_dir(Path("runs"), f"{Path(config_path).stem}-{time.strftime('%Y%m%d-%H%M%S')}")
    except OSError as error:
        raise UsageError(f"runs: cannot create the run directory ({error.strerror})") from None
    _hold(logdir)
    return logdir


def _hold(run_dir: Path) -> None:
    """Makes this process the owner of `run_dir` (muzero.run_dir.lock_run_dir), or names the owner."""
    try:
        lock_run_dir(run_dir)
    except RunDirInUse as error:
        raise UsageError(str(error)) from None
    except OSError as error:
        raise UsageError(f"{run_dir}: cannot write run directory ({error.strerror})") from None


def command_train(args: argparse.Namespace) -> int:
    from muzero.envs import EnvironmentSpecError, check_environment

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
        spec = check_environment(config.game, config.replay.augment_symmetries, config.network)
        if config.run.eval_opponents:
            from muzero.arena import check_opponents

            check_opponents(config.game, config.run.eval_opponents)
    except EnvironmentSpecError as error:
        raise UsageError(f"{_blame(args.set, error.key, where)}: {error.key}: {error}") from None
    if args.print_config:  # a dry run: everything above is checked, nothing is written
        if args.logdir is not None:
            _check_logdir(Path(args.logdir))
        print(config_to_yaml(config), end="")
        return 0
    if args.resume is not None:
        _check_writable(logdir)
    elif args.logdir:
        logdir = Path(args.logdir)
        prepare_run_dir(logdir)
    else:
        logdir = _new_run_dir(config_paths[-1])
    log_to_file(logdir / LOG_FILE)

    load_tensorflow()
    from muzero.actors import ClusterError
    from muzero.checkpoints import CheckpointError
    from muzero.builder import train
    from muzero.runner import RunStopped

    logging.info("run directory %s; watch it with: tensorboard --logdir %s", logdir, logdir.parent)
    try:
        result = train(
            config,
            logdir,
            spec,
            resume=args.resume is not None,
            backend=args.backend,
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


def _blame(overrides: list[str], key: str, where: str) -> str:
    """ "--set KEY=VALUE" when the last --set touching `key` (it, a key inside it or a section
    holding it) set it, else `where` (the config files)."""
    for override in reversed(overrides):
        path = override.partition("=")[0].strip()
        if path == key or path.startswith(key + ".") or key.startswith((path + ".", path + "[")):
            return f"--set {override}"
    return where


def _check_backend(args: argparse.Namespace) -> None:
    """--backend / --ray-address, checked without importing Ray (or waiting minutes on ray.init)."""
    if args.ray_address is not None and args.backend != "ray":
        raise UsageError("--ray-address: only with --backend ray")
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

    A changed network shape is refused, naming the variables that differ; other changes
    are allowed and printed as a diff against the saved config.
    """
    from muzero.config_io import config_to_dict
    from muzero.networks.base import image_shape
    from muzero.networks.numpy_mlp import variable_shapes

    if not (run_dir / CONFIG_FILE).is_file():
        raise UsageError(f"{run_dir}: not a run directory (no {CONFIG_FILE})")
    if not args.print_config:
        _hold(run_dir)  # before anything is printed: a run still writing here is the one message
    steps = complete_steps(run_dir / CHECKPOINT_DIR)
    if not steps:
        raise UsageError(f"{run_dir / CHECKPOINT_DIR}: no complete checkpoint to resume from")
    if args.step is not None and args.step not in steps:
        raise UsageError(
            f"--step {args.step}: no complete checkpoint at that step in {run_dir / CHECKPOINT_DIR} "
            f"(complete: {', '.join(map(str, sorted(steps)))})"
        )
    saved = load_config(run_dir / CONFIG_FILE)
    config = load_config(args.config or [run_dir / CONFIG_FILE], args.set)

    def shapes(c):
        from muzero.envs import check_environment

        observation_shape = check_environment(c.game).observation_shape
        net = c.network
        if net.kind == "resnet":  # named by the config keys that set the shapes
            board = {}
            if len(observation_shape) == 1:  # a board game: the board's planes, rows and columns
                from muzero.envs import board_shape_of

                board = {"board (planes, rows, cols)": board_shape_of(c.game)}
            return {
                "network.kind": net.kind,
                "image shape": image_shape(c.game.stacked_frames, observation_shape),
                **board,
                "network.downsample": net.downsample,
                "game.action_space_size": c.action_space_size,
                "network.planes": net.planes,
                "network.blocks": net.blocks,
                "network.hidden_layers": net.hidden_layers,
                "network.support_size": net.support_size,
            }
        observation_size = 1
        for dim in observation_shape:
            observation_size *= dim
        return {
            "network.kind": net.kind,
            **variable_shapes(
                observation_size, c.action_space_size, net.hidden_state_size, net.hidden_layers, net.support_size
            ),
        }

    old_shapes, new_shapes = shapes(saved), shapes(config)
    differ = [
        f"{name} {old_shapes.get(name)} -> {new_shapes.get(name)}"
        for name in sorted(set(old_shapes) | set(new_shapes))
        if old_shapes.get(name) != new_shapes.get(name)
    ]
    if differ:
        raise UsageError(f"{run_dir}: cannot resume with a different network shape: {'; '.join(differ)}")
    if not args.print_config:
        log_to_file(run_dir / LOG_FILE)  # appended to: the resumed run's lines follow the first run's
    for key, (old, new) in _diff(config_to_dict(saved), config_to_dict(config)).items():
        logging.info("config changed on resume: %s: %r -> %r", key, old, new)
    return run_dir, config


def _diff(old: dict, new: dict, prefix: str = "") -> dict:
    out = {}
    for key in old.keys() | new.keys():
        path = f"{prefix}{key}"
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out.update(_diff(a, b, path + "."))
        elif a != b:
            out[path] = (a, b)
    return dict(sorted(out.items()))


def _check_writable(run_dir: Path) -> None:
    try:
        probe = run_dir / ".write_test"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise UsageError(f"{run_dir}: cannot write run directory ({error.strerror})") from None


def _check_run_dir(run_dir: Path):
    """A finished or running run to read from (no lock taken); returns its config."""
    if not (run_dir / CONFIG_FILE).is_file():
        raise UsageError(f"{run_dir}: not a run directory (no {CONFIG_FILE})")
    if not complete_steps(run_dir / CHECKPOINT_DIR):
        raise UsageError(f"{run_dir / CHECKPOINT_DIR}: no complete checkpoint")
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
    run_dir = Path(args.run)
    if args.episodes < 1:
        raise UsageError(f"--episodes: expected an integer >= 1, got {args.episodes}")
    if args.games < 2:
        raise UsageError(f"--games: expected an integer >= 2, got {args.games}")
    _check_simulations(args)
    config = _check_run_dir(run_dir)
    if args.opponent is not None:
        if args.video is not None:
            raise UsageError("--video: only without --opponent")
        return _evaluate_against(args, run_dir, config)
    video_dir = None
    if args.video is not None:
        video_dir = Path(args.video)
        if video_dir.exists() and not video_dir.is_dir():
            raise UsageError(f"--video {video_dir}: exists and is not a directory")
        try:
            video_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UsageError(f"--video {video_dir}: cannot create the directory ({error.strerror})") from None
        _check_writable(video_dir)

    load_tensorflow()
    from muzero.checkpoints import CheckpointError
    from muzero.evaluation import evaluate
    from muzero.video import VideoUnavailable

    try:
        returns, step = evaluate(run_dir, args.episodes, args.seed, video_dir, args.simulations)
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


def _evaluate_against(args: argparse.Namespace, run_dir: Path, config) -> int:
    """`evaluate --opponent`: a win/draw/loss table per side, printed and written as CSV."""
    import csv
    import io

    from muzero.arena import OpponentError, make_opponent, play_match
    from muzero.run_dir import write_atomically

    environment = _board_game(config, run_dir, "--opponent")
    try:  # the opponent's name (and whether the game can be solved) before TensorFlow loads
        make_opponent(args.opponent, environment.game, args.seed)
    except OpponentError as error:
        raise UsageError(f"--opponent: {error}") from None

    load_tensorflow()
    from muzero.checkpoints import CheckpointError
    from muzero.evaluation import load_run

    try:
        config, _, network, step = load_run(run_dir, args.simulations)
    except CheckpointError as error:
        raise UsageError(str(error)) from None
    result = play_match(config, network, args.opponent, args.games, args.seed)
    simulations = config.search.num_simulations
    print(
        f"MuZero (checkpoint at training step {step}, {simulations} simulations per move) against "
        f"{args.opponent}, {result.games()} games:"
    )
    print(f"{'side':<8}{'games':>7}{'win':>6}{'draw':>6}{'loss':>6}")
    for opponent, side, games, win, draw, loss in result.rows(args.opponent):
        print(f"{side:<8}{games:>7}{win:>6}{draw:>6}{loss:>6}")
    print(
        f"{'total':<8}{result.games():>7}{result.total('win'):>6}{result.total('draw'):>6}"
        f"{result.total('loss'):>6}   score {result.score():.3f} (win 1, draw 0.5)"
    )
    path = Path(args.csv) if args.csv else run_dir / f"match-{args.opponent.replace(':', '_')}.csv"
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["training_step", "simulations", "opponent", "side", "games", "win", "draw", "loss"])
    writer.writerows([step, simulations, *row] for row in result.rows(args.opponent))
    try:
        write_atomically(path, text.getvalue())
    except OSError as error:
        raise UsageError(f"{path}: cannot write the table ({error.strerror})") from None
    print(f"written to {path}")
    return 0


def command_play(args: argparse.Namespace) -> int:
    run_dir = Path(args.run)
    _check_simulations(args)
    config = _check_run_dir(run_dir)
    _board_game(config, run_dir, "play")

    load_tensorflow()
    from muzero.checkpoints import CheckpointError
    from muzero.evaluation import load_run
    from muzero.play import play

    try:
        config, _, network, _ = load_run(run_dir, args.simulations)
    except CheckpointError as error:
        raise UsageError(str(error)) from None
    try:
        play(config, network, args.human_first, sys.stdin, sys.stdout)
    except (EOFError, KeyboardInterrupt):
        print("\ngame abandoned", file=sys.stderr)
        return EXIT_STOPPED
    return 0


# What TensorFlow prints on stderr while it looks for CUDA on a machine without an NVIDIA driver.
CUDA_PROBE_NOISE = ("cudart_stub.cc", "failed call to cuInit", "All log messages before absl::InitializeLog")


def nvidia_driver_present() -> bool:
    """Whether this machine has an NVIDIA driver loaded (Linux: /proc/driver/nvidia, /dev/nvidiactl)."""
    return Path("/proc/driver/nvidia").exists() or Path("/dev/nvidiactl").exists()


def load_tensorflow() -> None:
    """Imports TensorFlow and lets it look for GPUs (once per process; after the input is checked).

    On a machine with no NVIDIA driver, TensorFlow's CUDA build prints lines such as
    "Could not find cuda drivers on your machine" and "failed call to cuInit" while it
    looks for GPUs, from C++ before its log settings apply (TF_CPP_MIN_LOG_LEVEL does
    not hide them all). There, the import and the GPU lookup run with stderr captured,
    and every other line is printed after. With a driver present nothing is hidden, so
    a GPU that fails to start is reported as TensorFlow reports it.
    """
    if "tensorflow" in sys.modules or nvidia_driver_present():
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow as tf

            tf.config.list_physical_devices("GPU")
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            lines = captured.read().decode("utf-8", errors="replace").splitlines(keepends=True)
            sys.stderr.write("".join(line for line in lines if not any(noise in line for noise in CUDA_PROBE_NOISE)))
            sys.stderr.flush()


def _drop_library_info(record: std_logging.LogRecord) -> bool:
    quiet = ("/tensorflow/", "/keras/")
    return record.levelno >= std_logging.WARNING or not any(part in record.pathname for part in quiet)


def main(args: argparse.Namespace) -> int:
    logging.set_verbosity(logging.INFO)
    # TensorFlow's and Keras' own INFO messages (checkpoint sharding, ...) are noise here;
    # they arrive through absl logging, so filter them by where they come from.
    logging.get_absl_handler().addFilter(_drop_library_info)
    try:
        if args.command == "train":
            return command_train(args)
        if args.command == "play":
            return command_play(args)
        return command_evaluate(args)
    except (ConfigError, UsageError) as error:
        print(f"muzero {args.command}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except Interrupted as stop:
        return _stopped_by(stop, args.command)


def _stopped_by(stop: Interrupted, command: str | None) -> int:
    """One line, and the shell's status for a process ended by the signal: 128 + its number."""
    # `train` hands the signals to its training loop once it runs; before that is start-up.
    when = "" if command in ("evaluate", "play") else " during start-up"
    print(
        f"muzero{f' {command}' if command else ''}: stopped by {signal.Signals(stop.signum).name}{when}",
        file=sys.stderr,
    )
    return 128 + stop.signum


def run() -> None:
    """Console-script entry point."""
    # TensorFlow's C++ start-up chatter (oneDNN, CUDA probing) hides the progress lines.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # Until the training loop installs its own handlers (stop after the step, final
    # checkpoint), SIGINT and SIGTERM end the process with one line, not a traceback.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _interrupt)
    try:
        app.run(main, flags_parser=parse_flags)
    except Interrupted as stop:  # before main: parsing the flags
        sys.exit(_stopped_by(stop, None))


if __name__ == "__main__":
    run()
