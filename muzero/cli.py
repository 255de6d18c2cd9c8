"""Command line: `muzero train`, `muzero evaluate` and `muzero play`: the flags, and which
command runs (`muzero.commands`).

Every check on user input (flags, YAML, environment id, run directory) runs before
TensorFlow is imported, and a failure is one line on stderr with exit status 2. SIGINT and
SIGTERM before the training loop takes them over end the process with one line too.
"""

from __future__ import annotations

import argparse
import signal
import sys

from absl import app, logging
from absl.flags import argparse_flags

from muzero.commands import DEFAULT_CONFIG, UsageError, command_evaluate, command_play, command_train
from muzero.config_io import BUILTIN_DEFAULTS, ConfigError
from muzero.run_dir import RunDirError
from muzero.tf_runtime import filter_library_logs, quiet_tensorflow_cpp

EXIT_USAGE = 2


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
        choices=("auto", "local", "ray"),
        default="auto",
        help="where self-play runs: 'ray' (self-play actors on Ray beside the learner, one per core "
        "unless actors.num_actors says; batches built on a thread of their own), 'local' (self-play "
        "and learner take turns in this process: slower, bit-reproducible), or 'auto' (default: "
        "'ray' when Ray is installed and the machine has 2 cores or more, else 'local'; under --resume: the "
        "run's own, from RUN_DIR/backend.txt, that of the last session that saved a checkpoint)",
    )
    train.add_argument(
        "--ray-address",
        default=None,
        metavar="HOST:PORT",
        help="with --backend ray or auto: join this cluster (`ray start --head` prints it); default: start a local one",
    )

    evaluate = commands.add_parser(
        "evaluate", help="greedy episodes with a run's latest checkpoint (or the one at --step)"
    )
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
        "Atari, MinAtar, CartPole with pygame); with --opponent, every game of the match as "
        "DIR/game-<i>-<side>-<outcome>.gif (tic-tac-toe, connect four; .mp4 without Pillow)",
    )
    _add_simulations(evaluate)
    _add_step(evaluate)

    play = commands.add_parser("play", help="play a two-player board game against a run's agent in the terminal")
    play.add_argument("--run", required=True, help="run directory written by `muzero train`")
    side = play.add_mutually_exclusive_group()
    side.add_argument("--first", dest="human_first", action="store_true", default=True, help="you move first (default)")
    side.add_argument("--second", dest="human_first", action="store_false", help="MuZero moves first")
    _add_simulations(play)
    _add_step(play)
    return parser.parse_args(argv[1:])


def _add_simulations(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--simulations",
        type=int,
        default=None,
        metavar="N",
        help="search with N simulations per move instead of the run's run.eval_simulations, or "
        "search.num_simulations where that is 0 (a bigger budget at evaluation than in self-play, "
        "as the paper's board-game matches)",
    )


def _add_step(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--step",
        type=int,
        default=None,
        metavar="N",
        help="the complete checkpoint at training step N instead of the newest (older ones are "
        "there when run.keep_checkpoint_every_steps kept them: a run's curve after the fact)",
    )


def main(args: argparse.Namespace) -> int:
    logging.set_verbosity(logging.INFO)
    filter_library_logs()
    try:
        if args.command == "train":
            return command_train(args)
        if args.command == "play":
            return command_play(args)
        return command_evaluate(args)
    except (ConfigError, RunDirError, UsageError) as error:
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
    quiet_tensorflow_cpp()
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
