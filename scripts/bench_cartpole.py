"""CartPole from scratch with the default config, for several seeds: when is it solved?

    python scripts/bench_cartpole.py [--seeds 0 1 2] [--episodes 100] [--out runs/bench_cartpole] [--backend local]

For each seed, runs `muzero train --config configs/cartpole.yaml` with greedy
evaluations of `--episodes` episodes every `--eval-interval` training steps, then
reports the training step, environment steps and wall time at which the mean greedy
return first reaches 195, 475 and 500. Wall time is given both in all and without
the time spent evaluating (100-episode evaluations are part of the benchmark, not of
training). Writes OUT/summary.csv and OUT/learning_curve.png (needs the `plot` extra).
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
from pathlib import Path

from benchlib import train_command

THRESHOLDS = (195.0, 475.0, 500.0)
ROOT = Path(__file__).resolve().parents[1]


def first_reaching(rows: list[dict], threshold: float) -> dict | None:
    for row in rows:
        if float(row["mean_return"]) >= threshold:
            return row
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--eval-interval", type=int, default=500)
    parser.add_argument("--config", default=str(ROOT / "configs" / "cartpole.yaml"))
    parser.add_argument("--out", type=Path, default=Path("runs/bench_cartpole"))
    parser.add_argument("--set", action="append", default=[], help="extra config overrides for every seed")
    parser.add_argument(
        "--backend", choices=["local", "ray", "auto"], default=None, help="`muzero train --backend` (default: its own)"
    )
    args = parser.parse_args()

    summary = []
    for seed in args.seeds:
        run_dir = args.out / f"seed-{seed}"
        if not (run_dir / "eval.csv").is_file():
            settings = [f"run.eval_episodes={args.episodes}", f"run.eval_interval={args.eval_interval}", *args.set]
            command = train_command(args.config, run_dir, seed, settings, args.backend)
            print(f"seed {seed}: {' '.join(command[1:])}", flush=True)
            subprocess.run(command, check=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        with open(run_dir / "eval.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        for threshold in THRESHOLDS:
            row = first_reaching(rows, threshold)
            entry = {"seed": seed, "threshold": threshold}
            if row is not None:
                wall, evaluating = float(row["wall_seconds"]), float(row["eval_seconds"])
                entry.update(
                    training_step=int(row["training_step"]),
                    env_steps=int(row["env_steps"]),
                    wall_seconds=wall,
                    wall_seconds_without_eval=round(wall - evaluating, 1),
                    # Stability: the lowest evaluation from then on (to the end of the run).
                    min_return_after=min(float(r["mean_return"]) for r in rows[rows.index(row) :]),
                )
            summary.append(entry)

    args.out.mkdir(parents=True, exist_ok=True)
    fields = [
        "seed",
        "threshold",
        "training_step",
        "env_steps",
        "wall_seconds",
        "wall_seconds_without_eval",
        "min_return_after",
    ]
    with open(args.out / "summary.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(summary)
    print(f"\nmean greedy return over {args.episodes} episodes, first at or above:")
    print("| seed | return | training step | env steps | wall s | wall s without evaluation | lowest return after |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for entry in summary:
        if "training_step" in entry:
            print(
                f"| {entry['seed']} | {entry['threshold']:g} | {entry['training_step']:,} | {entry['env_steps']:,} | "
                f"{entry['wall_seconds']:.0f} | {entry['wall_seconds_without_eval']:.0f} | "
                f"{entry['min_return_after']:.1f} |"
            )
        else:
            print(f"| {entry['seed']} | {entry['threshold']:g} | not reached | | | | |")
    print(f"wrote {args.out / 'summary.csv'}")
    try:
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "scripts" / "plot_learning_curve.py"),
                *[str(args.out / f"seed-{seed}") for seed in args.seeds],
                "--out",
                str(args.out / "learning_curve.png"),
                "--title",
                (
                    f"CartPole-v1, {' '.join(args.set) or 'default config'}\ngreedy return "
                    f"({args.episodes} episodes per point)"
                ),
            ],
            check=True,
        )
    except subprocess.CalledProcessError:
        print("no PNG (is matplotlib installed? pip install -e '.[plot]')")


if __name__ == "__main__":
    main()
