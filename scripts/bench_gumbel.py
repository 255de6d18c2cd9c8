"""Gumbel MuZero against pUCT by simulation budget (issue 34), one seed per cell.

    python scripts/bench_gumbel.py breakout [--budgets 2 4 8 16 50] [--env-steps 200000] [--out runs/bench_gumbel]
    python scripts/bench_gumbel.py speed [--budgets 2 4 8 16 50] [--configs minatar/breakout tictactoe connect4]
    python scripts/bench_gumbel.py boardgames --game tictactoe --minutes 10 [--budgets 4 16 50] [--final-opponents ...]

* breakout: for each budget and `search.algorithm` (puct, gumbel), trains
  `configs/minatar/breakout.yaml` as measured (0.1 steps per move, `BREAKOUT_AS_MEASURED`)
  with `muzero train` (seed 0) to `--env-steps` environment
  steps (`train.training_steps` = env steps x `train.steps_per_move`, so the
  run stops there) with a greedy evaluation of `--episodes` episodes 8 times on the way (the
  last at the end). A cell whose run reached the end is read, not run again; an interrupted
  one continues with `muzero train --resume`. A finished cell's eval.csv and config.yaml are
  kept in `--keep` (docs/gumbel/breakout/CELL, committed), read there by later sessions;
  `--read-only` runs none (the finished cells' tables and curves while the grid is under way). Writes OUT/breakout/curves.csv, the table of
  final returns OUT/breakout/final.csv and OUT/breakout/curves.png (return against env
  steps, one panel per budget, pUCT and Gumbel in each).
* speed: moves/s of each config's batched self-play for each budget and algorithm (the
  median of `--repeats` timings of `--moves` batched moves each), in this process, one after
  the other (`bench_throughput.selfplay_row`: as a self-play actor builds it, the freshly
  initialised network). Writes OUT/speed.csv.
* boardgames: for each budget and algorithm, `scripts/bench_boardgames.py --game GAME
  --seeds 0 --minutes M` (equal wall time for every cell) into OUT/GAME/<algorithm><budget>;
  gathers the final matches into OUT/GAME/final.csv, the evaluations into OUT/GAME/curves.csv,
  and OUT/GAME/curves.png (score against wall time, one panel per budget and opponent). A
  cell whose run holds its final matches is read, not run again; `--final-opponents` adds
  final matches to finished cells without training them again.

The cells run one after the other: never two timed things at once.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from pathlib import Path

from bench_boardgames import curve as board_curve
from bench_boardgames import run_folder
from bench_minatar import BREAKOUT_AS_MEASURED, DQN_CURVE, curve, finished, steps_per_move, train_kept

ROOT = Path(__file__).resolve().parents[1]
ALGORITHMS = ("puct", "gumbel")
BREAKOUT = ROOT / "configs" / "minatar" / "breakout.yaml"


def cells(budgets: list[int], first: list[str]) -> list[tuple[str, int]]:
    """(algorithm, budget) for every cell, the `first` ones ("gumbel4") ahead of the rest in
    the order given."""
    every = [(algorithm, budget) for budget in budgets for algorithm in ALGORITHMS]
    order = {name: i for i, name in enumerate(first)}
    return sorted(every, key=lambda cell: order.get(f"{cell[0]}{cell[1]}", len(first)))


def cell_settings(algorithm: str, budget: int) -> list[str]:
    return [f"search.algorithm={algorithm}", f"search.num_simulations={budget}"]


def breakout(args: argparse.Namespace) -> None:
    steps = round(args.env_steps * steps_per_move(BREAKOUT, BREAKOUT_AS_MEASURED))
    out = args.out / "breakout"
    rows, finals = [], []
    for algorithm, budget in cells(args.budgets, args.first):
        run_dir = out / f"{algorithm}{budget}"
        settings = [*BREAKOUT_AS_MEASURED, *cell_settings(algorithm, budget)] + [
            f"run.eval_interval={steps // 8}",
            f"run.eval_episodes={args.episodes}",
        ]
        kept = args.keep / run_dir.name
        if not args.read_only:
            train_kept(BREAKOUT, run_dir, kept, 0, settings, steps)
        done = next((folder for folder in (kept, run_dir) if finished(folder, steps)), None)
        if done is None:  # --read-only: a cell not finished yet
            continue
        points = curve("breakout", 0, done)
        for point in points:
            point.update(algorithm=algorithm, simulations=budget)
        rows += points
        last = points[-1]
        finals.append(
            {
                "algorithm": algorithm,
                "simulations": budget,
                "env_steps": last["env_steps"],
                "mean_return": last["mean_return"],
                "std_return": last["std_return"],
                "episodes": last["episodes"],
                "wall_minutes": round(last["wall_seconds"] / 60, 1),
            }
        )
        write_csv(out / "curves.csv", rows)
        write_csv(out / "final.csv", finals)
        plot(rows, sorted(set(args.budgets)), out / "curves.png", args.env_steps)
    print(f"written to {out}")


def plot(rows: list[dict], budgets: list[int], path: Path, env_steps: int) -> None:
    """Mean greedy return against env steps, one panel per budget, pUCT and Gumbel in each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(budgets), figsize=(3.4 * len(budgets), 3.2), sharey=True, squeeze=False)
    for axis, budget in zip(axes[0], budgets):
        for algorithm in ALGORITHMS:
            points = [r for r in rows if r["algorithm"] == algorithm and r["simulations"] == budget]
            if points:
                axis.plot(
                    [p["env_steps"] / 1000 for p in points],
                    [p["mean_return"] for p in points],
                    marker="o",
                    markersize=3,
                    label="pUCT" if algorithm == "puct" else "Gumbel",
                )
        dqn = [p for p in DQN_CURVE["breakout"] if p[0] <= 2.5e5]
        axis.plot(
            [p[0] / 1000 for p in dqn], [p[1] for p in dqn], color="grey", linestyle="--", linewidth=1, label="DQN"
        )
        axis.set_title(f"{budget} simulations", fontsize=10)
        axis.set_xlabel("environment steps (k)")
        axis.grid(alpha=0.3)
    axes[0][0].set_ylabel("mean greedy return (100 episodes)")
    axes[0][0].legend(loc="upper left", fontsize=8)
    fig.suptitle(f"MinAtar Breakout to {env_steps // 1000}k environment steps, seed 0, 2-core CPU")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def speed(args: argparse.Namespace) -> None:
    from bench_throughput import selfplay_row

    rows = []
    for config in args.configs:
        for algorithm, budget in cells(args.budgets, []):
            path = str(ROOT / "configs" / f"{config}.yaml")
            row = selfplay_row(path, cell_settings(algorithm, budget), args.moves, args.repeats)
            rows.append({"config": config, "algorithm": algorithm, "simulations": budget, **row})
            print(
                f"{config:18s} {algorithm:6s} {budget:3d} simulations: {row['moves_per_s']:7.1f} moves/s "
                f"(median of {row['moves_per_s_each']}; {row['games']} games per batched move)",
                flush=True,
            )
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "speed.csv", rows)
    print(f"written to {args.out / 'speed.csv'}")


def boardgames(args: argparse.Namespace) -> None:
    out = args.out / args.game
    finals, rows = [], []
    for algorithm, budget in cells(args.budgets, args.first):
        cell_out = out / f"{algorithm}{budget}"
        command = [sys.executable, str(ROOT / "scripts" / "bench_boardgames.py"), "--game", args.game]
        command += ["--seeds", "0", "--minutes", str(args.minutes), "--out", str(cell_out)]
        if args.final_opponents is not None:
            command += ["--final-opponents", *args.final_opponents]
        for setting in cell_settings(algorithm, budget):
            command += ["--set", setting]
        print(f"{cell_out.name}: {' '.join(command[1:])}", flush=True)
        subprocess.run(command, check=True)
        with open(cell_out / f"{args.game}_final.csv", newline="") as f:
            finals += [{"algorithm": algorithm, "simulations": budget, **row} for row in csv.DictReader(f)]
        write_csv(out / "final.csv", finals)
        rows += [
            {"algorithm": algorithm, "simulations": budget, **row}
            for row in board_curve(run_folder(cell_out, args.game, 0), 0)
        ]
        write_csv(out / "curves.csv", rows)
        plot_boardgame(rows, args.budgets, out / "curves.png", f"{args.game}, {args.minutes:g} minutes per cell")
    print(f"written to {out / 'final.csv'}, {out / 'curves.csv'} and {out / 'curves.png'}")


def plot_boardgame(rows: list[dict], budgets: list[int], path: Path, title: str) -> None:
    """Score (win 1, draw 0.5) against wall time: one row of panels per opponent, one column
    per budget, pUCT and Gumbel in each (against the perfect player, the games lost dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    opponents = sorted({row["opponent"] for row in rows})
    fig, axes = plt.subplots(
        len(opponents), len(budgets), figsize=(3.4 * len(budgets), 2.9 * len(opponents)), sharey=True, squeeze=False
    )
    for panels, opponent in zip(axes, opponents):
        for axis, budget in zip(panels, budgets):
            for index, algorithm in enumerate(ALGORITHMS):
                points = [
                    r
                    for r in rows
                    if (r["algorithm"], r["simulations"], r["opponent"]) == (algorithm, budget, opponent)
                ]
                minutes = [p["wall_seconds"] / 60 for p in points]
                name = "pUCT" if algorithm == "puct" else "Gumbel"
                axis.plot(minutes, [p["score"] for p in points], color=f"C{index}", marker=".", label=f"{name} score")
                if opponent == "perfect":
                    lost = [p["loss"] for p in points]
                    axis.plot(minutes, lost, color=f"C{index}", linestyle="--", label=f"{name} lost")
            axis.set_title(f"{budget} simulations, against {opponent}", fontsize=9)
            axis.set(xlabel="wall time (minutes)", ylim=(-0.02, 1.02))
            axis.grid(alpha=0.3)
        panels[0].legend(fontsize=7)
    fig.suptitle(f"{title}, seed 0, 2-core CPU")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["algorithm"])
        writer.writeheader()
        writer.writerows(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=["breakout", "speed", "boardgames"])
    parser.add_argument("--budgets", type=int, nargs="+", default=None, help="simulations per move")
    parser.add_argument("--first", nargs="*", default=["gumbel4", "puct16"], help="cells to run first")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_gumbel")
    parser.add_argument("--env-steps", type=int, default=200_000, help="breakout: environment steps per run")
    parser.add_argument("--episodes", type=int, default=100, help="breakout: greedy episodes per evaluation")
    parser.add_argument(
        "--keep", type=Path, default=ROOT / "docs" / "gumbel" / "breakout", help="breakout: finished cells' eval.csv"
    )
    parser.add_argument(
        "--read-only", action="store_true", help="breakout: tables and curves of the finished cells, running none"
    )
    parser.add_argument("--configs", nargs="+", default=["minatar/breakout", "tictactoe", "connect4"])
    parser.add_argument("--moves", type=int, default=20, help="speed: timed batched moves per timing")
    parser.add_argument("--repeats", type=int, default=5, help="speed: timings per cell, the median reported")
    parser.add_argument("--game", choices=["tictactoe", "connect4"], default="tictactoe")
    parser.add_argument("--minutes", type=float, default=10.0, help="boardgames: training minutes per cell")
    parser.add_argument("--final-opponents", nargs="*", help="boardgames: default the config's eval opponents")
    args = parser.parse_args()
    if args.budgets is None:
        args.budgets = [4, 16, 50] if args.part == "boardgames" else [2, 4, 8, 16, 50]
    {"breakout": breakout, "speed": speed, "boardgames": boardgames}[args.part](args)


if __name__ == "__main__":
    main()
