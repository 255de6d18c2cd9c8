"""Plots greedy evaluation returns of one or more runs (their eval.csv) into a PNG.

    python scripts/plot_learning_curve.py runs/NAME [runs/OTHER ...] --out docs/cartpole_learning_curve.png \
        [--labels NAME OTHER ...] [--dqn GAME] [--table]

`--dqn GAME` (a MinAtar game) draws DQN's curve of the MinAtar paper on the environment-steps
panel, to its first point past the longest run (within 1%), in place of CartPole's line at 200.
`--table` also prints every evaluation as a Markdown row, with DQN's return at its environment
steps (linear between the paper's points) when `--dqn` names a game.

Needs the `plot` extra (matplotlib), which `make train` / `make test` install.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from bench_minatar import DQN_CURVE, dqn_at, plot_dqn_curve
from benchlib import save_figure

LEGEND_COLUMNS = 3


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
    # Below the panels, not over them: with several runs and their bands any corner hides a curve.
    handles, names = by_steps.get_legend_handles_labels()
    if handles:  # none when every eval.csv is still empty and no DQN curve is drawn
        fig.legend(handles, names, loc="lower center", ncol=min(len(names), LEGEND_COLUMNS), fontsize=8)
    return fig


def legend_height(fig) -> float:
    """The share of `fig`'s height its legend's rows take below the panels."""
    rows = -(-len(fig.legends[0].get_texts()) // LEGEND_COLUMNS) if fig.legends else 0
    return 0.06 * rows


def table(runs: list[Path], labels: list[str], dqn: str | None = None) -> str:
    """Every evaluation of the runs as a Markdown table: its run, training step, environment
    steps, greedy return (mean and standard deviation over its episodes) and DQN's return at
    those steps (`dqn_at`; "-" without `dqn` or off DQN's curve)."""
    lines = [
        "| run | training step | environment steps | greedy return | std | DQN |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for run, label in zip(runs, labels):
        data = read_eval(run)
        for i, steps in enumerate(data.get("env_steps", [])):
            reference = dqn_at(dqn, steps) if dqn else None
            lines.append(
                f"| {label} | {data['training_step'][i]:.0f} | {steps:,.0f} | {data['mean_return'][i]:.2f} "
                f"| {data['std_return'][i]:.2f} | {'-' if reference is None else f'{reference:.2f}'} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--title", default="CartPole-v1: greedy return (10 episodes per point)")
    parser.add_argument("--labels", nargs="+", help="one legend entry per run (default: the run folders' names)")
    parser.add_argument(
        "--dqn", choices=sorted(DQN_CURVE), help="draw this MinAtar game's DQN curve, not the line at 200"
    )
    parser.add_argument("--table", action="store_true", help="also print every evaluation as a Markdown table")
    args = parser.parse_args()
    if args.labels and len(args.labels) != len(args.runs):
        parser.error(f"--labels: {len(args.labels)} given for {len(args.runs)} runs")
    for run in args.runs:
        if not (run / "eval.csv").is_file():
            parser.error(f"{run}: no eval.csv (not a run's folder, or no evaluation yet)")
    labels = args.labels or [run.name for run in args.runs]
    fig = draw(args.runs, labels, args.dqn)
    save_figure(fig, args.out, args.title, bottom=legend_height(fig))
    if args.table:
        print(table(args.runs, labels, args.dqn))


if __name__ == "__main__":
    main()
