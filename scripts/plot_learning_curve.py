"""Plots greedy evaluation returns of one or more runs (their eval.csv) into a PNG.

    python scripts/plot_learning_curve.py runs/NAME [runs/OTHER ...] --out docs/cartpole_learning_curve.png \
        [--labels NAME OTHER ...] [--dqn GAME]

`--dqn GAME` (a MinAtar game) draws DQN's curve of the MinAtar paper on the environment-steps
panel, to its first point past the longest run (within 1%), in place of CartPole's line at 200.

Needs the `plot` extra (matplotlib), which `make train` / `make test` install.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from bench_minatar import DQN_CURVE, plot_dqn_curve
from benchlib import save_figure


def read_eval(run_dir: Path) -> dict[str, list[float]]:
    with open(run_dir / "eval.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return {key: [float(row[key]) for row in rows] for key in rows[0]} if rows else {}


def draw(runs: list[Path], labels: list[str], dqn: str | None = None):
    """The figure: each run's greedy return against wall minutes (left) and environment steps
    (right); DQN's curve of the MinAtar game `dqn` on the right, or CartPole's line at 200 on both."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_time, by_steps) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    reach = 0.0
    for run, label in zip(runs, labels):
        data = read_eval(run)
        if not data:
            continue
        reach = max(reach, data["env_steps"][-1])
        minutes = [s / 60 for s in data["wall_seconds"]]
        low = [m - s for m, s in zip(data["mean_return"], data["std_return"])]
        high = [m + s for m, s in zip(data["mean_return"], data["std_return"])]
        for axis, x in ((by_time, minutes), (by_steps, data["env_steps"])):
            axis.plot(x, data["mean_return"], marker="o", markersize=3, label=label)
            axis.fill_between(x, low, high, alpha=0.2)
    if dqn:
        plot_dqn_curve(by_steps, dqn, reach)
    for axis in (by_time, by_steps):
        if not dqn:
            axis.axhline(200, color="grey", linestyle="--", linewidth=1)
        axis.grid(alpha=0.3)
    by_time.set_xlabel("wall-clock minutes since start")
    by_steps.set_xlabel("environment steps (self-play moves)")
    by_time.set_ylabel("greedy return (mean ± std)")
    by_steps.legend(loc="lower right", fontsize=8)
    return fig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--title", default="CartPole-v1: greedy return (10 episodes per point)")
    parser.add_argument("--labels", nargs="+", help="one legend entry per run (default: the run folders' names)")
    parser.add_argument(
        "--dqn", choices=sorted(DQN_CURVE), help="draw this MinAtar game's DQN curve, not the line at 200"
    )
    args = parser.parse_args()
    if args.labels and len(args.labels) != len(args.runs):
        parser.error(f"--labels: {len(args.labels)} given for {len(args.runs)} runs")
    save_figure(draw(args.runs, args.labels or [run.name for run in args.runs], args.dqn), args.out, args.title)


if __name__ == "__main__":
    main()
