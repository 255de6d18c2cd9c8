"""Command line: `muzero train` and `muzero evaluate`.

Every check on user input (flags, YAML, environment id, run directory) runs before
TensorFlow is imported, and a failure is one line on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import logging as std_logging
import os
import sys
import time
from pathlib import Path

from absl import app, logging
from absl.flags import argparse_flags

from muzero.config_io import ConfigError, load_config

EXIT_USAGE = 2
DEFAULT_CONFIG = "configs/cartpole.yaml"


class UsageError(Exception):
    """Bad input found by the CLI; printed as one line, exit status 2."""


def parse_flags(argv: list[str]) -> argparse.Namespace:
    # allow_abbrev=False: absl's own flags (--run_with_pdb, ...) must not make --run ambiguous.
    parser = argparse_flags.ArgumentParser(prog="muzero", description="MuZero trainer (TensorFlow 2).",
                                           allow_abbrev=False)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=argparse.ArgumentParser)

    train = commands.add_parser("train", help="train from a YAML config")
    train.add_argument("--config", default=DEFAULT_CONFIG, help="YAML config file (default: %(default)s)")
    train.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config key, e.g. --set train.batch_size=64 (repeatable)")
    train.add_argument("--logdir", default=None,
                       help="run directory (default: runs/<config name>-<date-time>); must be new or empty")

    evaluate = commands.add_parser("evaluate", help="greedy episodes with a run's latest checkpoint")
    evaluate.add_argument("--run", required=True, help="run directory written by `muzero train`")
    evaluate.add_argument("--episodes", type=int, default=10, help="number of episodes (default: %(default)s)")
    evaluate.add_argument("--seed", type=int, default=12345, help="environment seed (default: %(default)s)")
    return parser.parse_args(argv[1:])


def prepare_run_dir(logdir: Path) -> None:
    """Creates `logdir`, refusing one that holds files or cannot be written."""
    if logdir.exists() and not logdir.is_dir():
        raise UsageError(f"{logdir}: run directory path exists and is not a directory")
    if logdir.is_dir() and any(logdir.iterdir()):
        raise UsageError(f"{logdir}: run directory already holds files; choose a new --logdir")
    try:
        logdir.mkdir(parents=True, exist_ok=True)
        probe = logdir / ".write_test"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise UsageError(f"{logdir}: cannot write run directory ({error.strerror})") from None


def command_train(args: argparse.Namespace) -> int:
    from muzero.environment import EnvironmentSpecError, check_environment

    config = load_config(args.config, args.set)
    try:
        observation_shape = check_environment(config.game.id, config.action_space_size)
    except EnvironmentSpecError as error:
        raise UsageError(f"{args.config}: game.id: {error}") from None
    logdir = Path(args.logdir) if args.logdir else Path("runs") / f"{Path(args.config).stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    prepare_run_dir(logdir)

    from muzero.runner import train

    logging.info("run directory %s; watch it with: tensorboard --logdir %s", logdir, logdir.parent)
    result = train(config, logdir, observation_shape)
    logging.info("done: %d training steps, %d games, %d moves in %.0fs; greedy return %.1f +- %.1f",
                 result["training_step"], result["games"], result["env_steps"], result["wall_seconds"],
                 result["mean_return"], result["std_return"])
    return 0


def command_evaluate(args: argparse.Namespace) -> int:
    run_dir = Path(args.run)
    if args.episodes < 1:
        raise UsageError(f"--episodes: expected an integer >= 1, got {args.episodes}")
    if not (run_dir / "config.yaml").is_file():
        raise UsageError(f"{run_dir}: not a run directory (no config.yaml)")
    if not (run_dir / "checkpoints" / "checkpoint").is_file():
        raise UsageError(f"{run_dir / 'checkpoints'}: no checkpoint found")
    load_config(run_dir / "config.yaml")

    from muzero.runner import evaluate

    returns, step = evaluate(run_dir, args.episodes, args.seed)
    print(f"mean return {returns.mean():.1f} +- {returns.std():.1f} over {len(returns)} greedy episodes "
          f"(checkpoint at training step {step})")
    return 0


def main(args: argparse.Namespace) -> int:
    logging.set_verbosity(logging.INFO)
    # TensorFlow's Python INFO messages (checkpoint sharding, ...) are noise here.
    std_logging.getLogger("tensorflow").setLevel(std_logging.WARNING)
    try:
        if args.command == "train":
            return command_train(args)
        return command_evaluate(args)
    except (ConfigError, UsageError) as error:
        print(f"muzero {args.command}: error: {error}", file=sys.stderr)
        return EXIT_USAGE


def run() -> None:
    """Console-script entry point."""
    # TensorFlow's C++ start-up chatter (oneDNN, CUDA probing) hides the progress lines.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    app.run(main, flags_parser=parse_flags)


if __name__ == "__main__":
    run()
