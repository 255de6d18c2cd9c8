"""Board games from scratch against OpenSpiel's bots and a perfect player, for a wall-time budget.

    python scripts/bench_boardgames.py --game tictactoe --seeds 0 1 2 --minutes 15
    python scripts/bench_boardgames.py --game connect4 --seeds 0 --minutes 60

Each seed trains `configs/<game>.yaml` with the real command (`muzero train`) for a budget of
`--minutes` of training time, set as `run.time_limit_minutes`: the run ends itself with a final
checkpoint and evaluation (start-up before its loop is not counted), and an interrupted seed
resumed with `muzero train --resume` stops at the same budget. The run's own
evaluations (`run.eval_interval`, `run.eval_opponents`, `run.eval_games` games each, half
as first player) give the curve; at the end the final checkpoint plays `--final-games`
games against each of `--final-opponents` (default: the config's), searching the run's
evaluation budget or `--final-simulations` per move (the paper's board-game matches search
800). Writes, under `--out`:

* `<game>_seed<S>/`: the run folders;
* `<game>_curve.csv`: seed, training step, environment steps, wall seconds, opponent,
  win/draw/loss fractions, score;
* `<game>_final.csv` (`<game>_final_sims<N>.csv` with `--final-simulations N`): the final
  matches, per side;
* `<game>_score.png`: score (win 1, draw 0.5) against wall time and against environment
  steps, one column per opponent, with the fraction of games lost against the perfect
  player where it was an opponent.

A seed whose run folder already holds a final match (`final-<opponent>[-sims<N>].csv`) is
not trained again: it plays only the final matches it lacks (another `--final-opponents` or
`--final-simulations`), and the rest are read. So seeds measured apart add up to one curve
and table by running the command again with all the seeds (and the same `--minutes` and
`--set`: the folders are not checked against them), and both budgets' tables come from two
calls, one with `--final-simulations N` (an N equal to the run's budget plays that match
again under its own name). A folder without any final match (an interrupted run, stopped
with Ctrl-C or cut by the end of a session) continues with `muzero train --resume`, which
keeps the run's config and what is left of its budget, and then plays its final matches: so
the same command, run again, finishes it.
"""

from __future__ import annotations

import argparse
import csv
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from benchlib import resume_command, train_command

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {"tictactoe": ROOT / "configs" / "tictactoe.yaml", "connect4": ROOT / "configs" / "connect4.yaml"}


# Past the budget, the seconds a run may take to start and to play its final evaluation
# before it is stopped from outside (SIGTERM: a final checkpoint, exit 0).
GRACE_SECONDS = 900


def train_for(config: Path, run_dir: Path, seed: int, minutes: float, settings: list[str]) -> float:
    """Trains for `minutes` of the run's own training time (`run.time_limit_minutes`, or until
    the run ends sooner); returns the seconds the process ran.

    A `run_dir` that exists already (an interrupted run) continues with `muzero train
    --resume`, with its own config and the budget it has left (`settings` and `seed` apply
    to a fresh run only; `minutes` still bounds the wait), its output added to the end of
    its log.
    """
    resume = run_dir.exists()
    if resume:
        command = resume_command(run_dir)
    else:
        command = train_command(config, run_dir, seed, [*settings, f"run.time_limit_minutes={minutes}"])
    log_path = run_dir.parent / f"{run_dir.name}.log"
    started = time.time()
    with log_path.open("a" if resume else "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            process.wait(timeout=minutes * 60 + GRACE_SECONDS)
        except subprocess.TimeoutExpired:  # the run should have ended itself: say so, then stop it
            late = f"{GRACE_SECONDS} s past its budget and start-up"
            print(f"{run_dir.name}: still running {late}; stopped with SIGTERM", file=sys.stderr)
            process.send_signal(signal.SIGTERM)
            process.wait()
    if process.returncode != 0:
        lines = log_path.read_text(errors="replace").splitlines() or [""]
        raise SystemExit(f"{run_dir}: training failed (exit {process.returncode}): {lines[-1]} (see {log_path})")
    return time.time() - started


def run_folder(out: Path, game: str, seed: int) -> Path:
    """A seed's run folder under `--out`."""
    return out / f"{game}_seed{seed}"


def final_table(run_dir: Path, opponent: str, simulations: int | None = None) -> Path:
    """Where the final match against `opponent` is written (`muzero evaluate --csv`); with
    `simulations`, the match searching that many per move instead of the run's budget."""
    suffix = "" if simulations is None else f"-sims{simulations}"
    return run_dir / f"final-{opponent.replace(':', '_')}{suffix}.csv"


def final_rows(run_dir: Path, opponents: list[str], simulations: int | None = None) -> list[dict]:
    """The final matches' CSV rows, each with the run folder's name added as `run`."""
    return [
        dict(row, run=run_dir.name)
        for opponent in opponents
        for row in csv.DictReader(final_table(run_dir, opponent, simulations).open())
    ]


def final_matches(run_dir: Path, opponents: list[str], games: int, simulations: int | None = None) -> None:
    """Plays the final match against each of `opponents`, written to its `final_table`."""
    search_budget = [] if simulations is None else ["--simulations", str(simulations)]
    for opponent in opponents:
        table = final_table(run_dir, opponent, simulations)
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "muzero.cli",
                "evaluate",
                "--run",
                str(run_dir),
                "--opponent",
                opponent,
                "--games",
                str(games),
                "--csv",
                str(table),
                *search_budget,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise SystemExit(f"{run_dir}: evaluation against {opponent} failed: {result.stderr[-500:]}")
        print(result.stdout.strip())


def curve(run_dir: Path, seed: int) -> list[dict]:
    """The run's evaluations against opponents, both sides summed, as fractions."""
    path = run_dir / "eval_opponents.csv"
    totals: dict[tuple, dict] = defaultdict(lambda: defaultdict(float))
    for row in csv.DictReader(path.open()) if path.is_file() else []:
        key = (int(row["training_step"]), int(row["env_steps"]), float(row["wall_seconds"]), row["opponent"])
        for column in ("games", "win", "draw", "loss"):
            totals[key][column] += float(row[column])
    out = []
    for (step, env_steps, wall, opponent), t in sorted(totals.items()):
        out.append(
            {
                "seed": seed,
                "training_step": step,
                "env_steps": env_steps,
                "wall_seconds": wall,
                "opponent": opponent,
                "win": t["win"] / t["games"],
                "draw": t["draw"] / t["games"],
                "loss": t["loss"] / t["games"],
                "score": (t["win"] + 0.5 * t["draw"]) / t["games"],
            }
        )
    return out


def plot(rows: list[dict], path: Path, title: str) -> None:
    """Score against wall time (top) and environment steps (bottom), one column per opponent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    opponents = sorted({row["opponent"] for row in rows})
    fig, axes = plt.subplots(2, len(opponents), figsize=(5 * len(opponents), 7.2), squeeze=False)
    for by_time, by_steps, opponent in zip(axes[0], axes[1], opponents):
        for index, seed in enumerate(sorted({row["seed"] for row in rows})):
            points = [row for row in rows if row["opponent"] == opponent and row["seed"] == seed]
            color = f"C{index % 10}"  # one colour per seed in every panel
            for axis, xs in (
                (by_time, [row["wall_seconds"] / 60 for row in points]),
                (by_steps, [row["env_steps"] for row in points]),
            ):
                axis.plot(xs, [row["score"] for row in points], color=color, marker=".", label=f"seed {seed}: score")
                if opponent == "perfect":
                    axis.plot(
                        xs, [row["loss"] for row in points], color=color, linestyle="--", label=f"seed {seed}: lost"
                    )
        by_time.set(title=f"against {opponent}", xlabel="wall time (minutes)", ylim=(-0.02, 1.02))
        by_steps.set(xlabel="environment steps (self-play moves)", ylim=(-0.02, 1.02))
        # "100k", not "100000": six-digit labels run into each other past 100k moves.
        by_steps.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x / 1000:g}k"))
        for axis in (by_time, by_steps):
            axis.grid(alpha=0.3)
            axis.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", choices=sorted(CONFIGS), default="tictactoe")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--minutes", type=float, default=15.0, help="training budget per seed")
    parser.add_argument("--final-opponents", nargs="*", default=None, help="default: the config's eval opponents")
    parser.add_argument("--final-games", type=int, default=100)
    parser.add_argument("--final-simulations", type=int, default=None, help="default: the run's evaluation budget")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_boardgames")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config overrides")
    args = parser.parse_args()
    if not args.minutes > 0:  # run.time_limit_minutes 0 would mean no limit at all
        parser.error(f"--minutes: expected > 0, got {args.minutes:g}")
    if args.final_simulations is not None and args.final_simulations < 1:
        parser.error(f"--final-simulations: expected at least 1, got {args.final_simulations}")

    sys.path.insert(0, str(ROOT))
    from muzero.config_loader import load_config
    from muzero.run_dir import RunDirError, check_resumable

    config = load_config(CONFIGS[args.game], args.set)
    opponents = args.final_opponents if args.final_opponents is not None else list(config.run.eval_opponents)
    args.out.mkdir(parents=True, exist_ok=True)
    rows, finals = [], []
    budget = args.final_simulations  # None: the run's own evaluation budget
    for seed in args.seeds:
        run_dir = run_folder(args.out, args.game, seed)
        if any(run_dir.glob(final_table(run_dir, "*").name)):  # trained before: final matches follow training
            print(f"{run_dir.name}: measured before, not trained again; plays only the final matches it lacks")
        else:
            if run_dir.exists():  # an interrupted run; one that cannot be resumed is named with its reason
                try:
                    check_resumable(run_dir, hold=False)
                except RunDirError as error:
                    raise SystemExit(f"{error}; remove {run_dir} to train seed {seed} from scratch") from None
                print(f"{run_dir.name}: interrupted before its final matches; resumed (muzero train --resume)")
            seconds = train_for(CONFIGS[args.game], run_dir, seed, args.minutes, args.set)
            print(f"{run_dir.name}: ran for {seconds / 60:.1f} minutes (start-up and final evaluation included)")
        missing = [opponent for opponent in opponents if not final_table(run_dir, opponent, budget).is_file()]
        final_matches(run_dir, missing, args.final_games, budget)
        finals += final_rows(run_dir, opponents, budget)
        rows += curve(run_dir, seed)
    with open(args.out / f"{args.game}_curve.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["seed"])
        writer.writeheader()
        writer.writerows(rows)
    final_name = f"{args.game}_final.csv" if budget is None else f"{args.game}_final_sims{budget}.csv"
    with open(args.out / final_name, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(finals[0]) if finals else ["run"])
        writer.writeheader()
        writer.writerows(finals)
    if rows:
        plot(rows, args.out / f"{args.game}_score.png", f"{args.game}: {args.minutes:g} minutes per seed, 2-core CPU")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
