"""Plots TensorBoard scalars of a run (its event files) against the training step into a PNG.

    python scripts/plot_scalars.py runs/NAME replay/bytes [replay/games ...] --out docs/PLOT.png \
        [--line VALUE --line-label TEXT]

Each tag gets a panel of its own; `--line` draws a horizontal reference (a bound, a target)
on every panel. Needs the `plot` extra (matplotlib), which `make train` / `make test` install.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchlib import save_figure


def read_scalars(run_dir: Path, tag: str) -> tuple[list[int], list[float]]:
    """(steps, values) of one scalar tag over the run's event files, in step order."""
    import tensorflow as tf

    points = []
    for event_file in sorted(run_dir.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(event_file)):
            for value in event.summary.value:
                if value.tag == tag:
                    points.append((event.step, float(tf.make_ndarray(value.tensor))))
    points.sort()
    return [step for step, _ in points], [value for _, value in points]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("tags", nargs="+")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--line", type=float, default=None, help="a horizontal reference on every panel")
    parser.add_argument("--line-label", default="bound")
    parser.add_argument("--title", default=None)
    args = parser.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(args.tags), figsize=(5.5 * len(args.tags), 3.8), squeeze=False)
    for axis, tag in zip(axes[0], args.tags):
        steps, values = read_scalars(args.run, tag)
        if not steps:
            parser.error(f"{args.run}: no scalar {tag!r} in its event files")
        axis.plot(steps, values, linewidth=1.2)
        if args.line is not None:
            axis.axhline(args.line, color="red", linestyle="--", linewidth=1, label=args.line_label)
            axis.legend(loc="lower right", fontsize=8)
        axis.set_title(tag)
        axis.set_xlabel("training step")
        axis.grid(alpha=0.3)
    save_figure(fig, args.out, args.title or str(args.run))


if __name__ == "__main__":
    main()
