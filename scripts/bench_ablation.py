"""Sample-efficiency ablation (issue 35): MinAtar Breakout with EfficientZero's pieces alone and together.

    python scripts/bench_ablation.py [--cells baseline value_prefix ...] [--seeds 0] [--env-steps 500000]
    python scripts/bench_ablation.py --cells together --seeds 0 1 2      # the recipe on 3 seeds
    python scripts/bench_ablation.py --seeds 0 1 2 --read-only --out /tmp/ablation   # table and plot of what is kept

Each cell trains `configs/minatar/breakout.yaml` as the ablation measured it (0.1 training steps
per move, `BREAKOUT_AS_MEASURED`) with its `--set` overrides (CELLS) from
scratch to `--env-steps` environment steps (`train.training_steps` = env steps x the cell's
`train.steps_per_move`), with a greedy evaluation of `--episodes` episodes every
`--eval-every` environment steps. Cells run one after the other. A finished cell is kept,
its `eval.csv` and `config.yaml`, in `--keep` (default docs/ablation/CELL_seedS), so that a
later session (whose runs/ starts empty) reads it instead of running it again; a cell cut
short continues from its run folder with `muzero train --resume`.

Writes OUT/table.md (the return at the first evaluation at or past each of MARKS, its
environment steps beside it, and DQN's return there; the mean of the evaluations from LATE
to the last mark; for a cell run on several seeds, a row of the seeds' mean ± its standard
error), OUT/curves.csv, OUT/curves.png (return against environment steps, DQN's curve dashed)
and OUT/seeds.png (the cells run on several seeds: their mean ± standard error, each seed thin).
"""

from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path

from bench_minatar import BREAKOUT_AS_MEASURED, DQN_CURVE, curve, dqn_at, finished, steps_per_move, train_kept
from benchlib import markdown_table, number, write_csv

ROOT = Path(__file__).resolve().parents[1]
BREAKOUT = ROOT / "configs" / "minatar" / "breakout.yaml"
MARKS = (100_000, 250_000, 500_000)
# One evaluation is one checkpoint, and checkpoints of one run differ by more than the 100
# episodes' standard error (the baseline: 9.00 at 303k, 5.66 at 352k); the mean of the
# evaluations from LATE on is the steadier figure for the end of a run.
LATE = 300_000
# Each option at EfficientZero's value where it has one (Ye et al. 2021, appendix A.2), but
# the share of reanalysed policy targets: MuZero Reanalyze's 0.8, not EfficientZero's 0.99.
OPTIONS = {
    # The value horizon shrinks by one step for every 2,000 training steps (20,000 env steps at
    # 0.1 steps per move) of a position's age; this config's td_steps 10 reaches 1 at 18,000
    # steps, about the age of the oldest games in its 2,000-game window early in the run.
    "off_policy": ["replay.off_policy_correction_steps=2000"],
    "value_prefix": ["network.value_prefix=true"],  # horizon 5, EfficientZero's lstm_horizon_len
    # EfficientZero's lambda_3, with its SimSiam heads: a projection of 256 units (its Atari: 1,024
    # from 64 x 6 x 6 states; here 16 x 10 x 10) and the prediction head. The first run of this
    # cell compared the states without heads: docs/ablation/consistency_centred_seed0.
    "consistency": ["train.consistency_loss_weight=2", "network.projection_size=256"],
    # The paper's share of reanalysed policy targets, with as many positions searched again as
    # self-play plays (10 per training step at 0.1 steps per move): about one fresh search per
    # stored position over the run, at twice self-play's search cost. In `together` (0.2 steps
    # per move) that is 2 per move: the same fresh searches per training step.
    "reanalyse": ["reanalyse.fraction=0.8", "reanalyse.positions_per_step=10"],
    # Twice the training steps per environment step (EfficientZero trains on each sample more),
    # with the learning rate's decay stretched to match: the schedule counts training steps, so
    # without it the rate at each environment step would be that of twice the steps (measured:
    # docs/sample_efficiency_breakout.md, "More training with the schedule by training step").
    "more_training": ["train.steps_per_move=0.2", "train.lr_decay_steps=100000"],
}
# Beyond EfficientZero's pieces: what other MuZero implementations' Atari configs do differently
# (docs/sample_efficiency.md, "Other implementations"). Not in `together`, which is EfficientZero's.
OTHERS = {
    # EfficientZero keeps its rate flat while data arrives (0.2 until its last 20k offline steps);
    # the pseudocode's tenfold decay over this run is down to 0.016 by 250k environment steps.
    "lr_flat": ["train.lr_decay_rate=1.0"],
    # EfficientZero's and LightZero's networks have 64 planes; this config's 16 are DQN's, for a
    # representation alone, where here the same planes also carry the dynamics.
    "wider": ["network.planes=32"],
    # The yardstick's DQN and LightZero's Atari configs sample replay uniformly; this config uses
    # the MuZero paper's alpha = beta = 1, which draws high-error positions far more often.
    "uniform_replay": ["replay.priority_alpha=0"],
    # EfficientZero's, LightZero's and the paper's 50 simulations, in self-play and evaluation
    # (this config's 16 are for the CPU: a move's search costs about threefold at 50).
    "sims50": ["search.num_simulations=50"],
    # EfficientZero's and LightZero's MinMaxStats divide by at least 0.01; the pseudocode's stretches
    # any range over [0, 1], so early on, when every value is near 0, differences of a thousandth
    # between children can outweigh the prior. `uniform_replay` collapsed onto one action without
    # the floor and not with it (a probe to 100k; docs/sample_efficiency_breakout.md).
    "min_value_range": ["search.min_value_range=0.01"],
    # The MinAtar baselines train with adaptive optimizers (its DQN: RMSProp at 2.5e-4; Revisiting
    # Rainbow: Adam at 1e-4), as do small-scale MuZeros (Stoix: Adam at 3e-4); the pseudocode's SGD
    # at 0.05 is the paper's Atari at scale. Adam at 3e-4 here, with this config's tenfold decay.
    "adam": ["train.optimizer=adam", "train.lr_init=0.0003"],
    # `more_training` one step further towards EfficientZero's replay ratio (about 40 times the
    # baseline's): three times the baseline's training steps per environment step, the decay per
    # environment step kept again. It costs wall time in proportion on 2 cores.
    "more_training_x3": ["train.steps_per_move=0.3", "train.lr_decay_steps=150000"],
    # EfficientZero's zeroed output layers (value, reward, policy) with the floor they need: an
    # untrained network then says value 0 and a uniform prior, where Keras's initialisation makes
    # up values that stay in replay (Freeway crossed only with both: docs/sample_efficiency_freeway.md).
    "init_zero": ["network.init_zero=true", "search.min_value_range=0.01"],
}
# All of EfficientZero's pieces at once, each override once.
TOGETHER = [s for settings in OPTIONS.values() for s in settings]
# Cells that explain another cell's result, not options of their own (not in `together`).
DIAGNOSTICS = {
    # The visit-count temperature falls by training step (10,000 and 20,000), so `more_training`
    # also explores less per environment step: 0.5 from 50k environment steps, not 100k. This
    # keeps the baseline's temperature per environment step, so that the two changes are told apart.
    "more_training_same_temperature": [
        *OPTIONS["more_training"],
        "search.visit_softmax_temperature.schedule=[[20000, 1.0], [40000, 0.5], [null, 0.25]]",
    ],
    # The `reanalyse` cell moves every value target to θ⁻'s 5-step bootstrap (the paper's
    # Reanalyze) where the baseline's is 10 steps of the stored search value; this one keeps
    # the baseline's horizon, so that the two changes are told apart.
    "reanalyse_td10": [*OPTIONS["reanalyse"], "reanalyse.td_steps=10"],
    # `together` led every seed-0 cell at 200k-250k, then fell below the baseline, and Reanalyse
    # alone (at the paper's 5 steps) was the weakest piece from 300k on: the other four pieces
    # without it tell whether Reanalyse is what pulls `together` down.
    "together_without_reanalyse": [s for name, settings in OPTIONS.items() if name != "reanalyse" for s in settings],
    # `reanalyse_td10` ended at 10.08 where `reanalyse` (5 steps) ended at 3.93: this is `together`
    # with θ⁻'s bootstrap at the baseline's 10 steps, from which the off-policy correction shrinks it.
    "together_td10": [*TOGETHER, "reanalyse.td_steps=10"],
    # `uniform_replay` collapsed; with the floor on MinMaxStats' range it did not (a probe to 100k,
    # docs/ablation/probes/). This runs it to 500k: whether the yardstick DQN's replay stays clear
    # of the collapse with the floor (seed 0 locked early, then recovered).
    "uniform_replay_min_value_range": [*OTHERS["uniform_replay"], *OTHERS["min_value_range"]],
    # First definitions of two cells, run and kept under these names: the consistency loss on the
    # states themselves, without EfficientZero's heads; twice the training with the learning
    # rate's decay by training step, so at each environment step a far lower rate.
    "consistency_centred": ["train.consistency_loss_weight=2"],
    "more_training_lr_by_step": ["train.steps_per_move=0.2"],
}
CELLS = {
    "baseline": [],
    **OPTIONS,
    "together": TOGETHER,
    **OTHERS,
    **DIAGNOSTICS,
}


def at_marks(points: list[dict], marks=MARKS) -> list[tuple[float, int] | None]:
    """(return, env steps) of the first evaluation at or past each mark; None when the run
    stopped before it."""
    found = []
    for mark in marks:
        past = [p for p in points if p["env_steps"] >= mark]
        found.append((past[0]["mean_return"], past[0]["env_steps"]) if past else None)
    return found


def cell_settings(name: str) -> list[str]:
    """The `--set` overrides of cell `name`: the config as the ablation measured it, then the cell's."""
    return [*BREAKOUT_AS_MEASURED, *CELLS[name]]


def run_cell(name: str, seed: int, args: argparse.Namespace) -> list[dict]:
    settings = cell_settings(name)
    rate = steps_per_move(BREAKOUT, settings)
    steps = round(args.env_steps * rate)
    kept, run_dir = args.keep / f"{name}_seed{seed}", args.out / f"{name}_seed{seed}"
    every = max(1, round(args.eval_every * rate))
    evaluation = [f"run.eval_interval={every}", f"run.eval_episodes={args.episodes}"]
    if args.read_only and not finished(kept, steps):
        print(f"{kept.name}: not kept, left out (--read-only)", flush=True)
        return []
    train_kept(BREAKOUT, run_dir, kept, seed, [*settings, *evaluation], steps)
    points = curve("breakout", seed, kept)
    for point in points:
        point["cell"] = name
    return points


def late_mean(points: list[dict], start: int = LATE, stop: int = MARKS[-1]) -> float | None:
    """Mean return of the evaluations from `start` environment steps to the first at or past
    `stop`; None when the run stopped before `stop`."""
    end = at_marks(points, (stop,))[0]
    if end is None:
        return None
    late = [p["mean_return"] for p in points if start <= p["env_steps"] <= end[1]]
    return sum(late) / len(late)


def mean_and_error(values: list[float | None]) -> str:
    """'mean ± standard error' of the seeds' figures; '-' unless every seed has one."""
    if not values or any(v is None for v in values):
        return "-"
    error = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.2f} ± {error:.2f}"


def seed_runs(rows: list[dict], name: str) -> dict[int, list[dict]]:
    """Cell `name`'s evaluations, by seed (in seed order)."""
    runs: dict[int, list[dict]] = {}
    for r in rows:
        if r["cell"] == name:
            runs.setdefault(r["seed"], []).append(r)
    return dict(sorted(runs.items()))


def table(rows: list[dict], cells: list[str], seeds: list[int]) -> str:
    body = []
    for name in cells:
        per_seed = []  # (figures at MARKS, late mean) of each seed run
        runs = seed_runs(rows, name)
        for seed in seeds:
            points = runs.get(seed)
            if not points:
                continue
            marks, late = at_marks(points), late_mean(points)
            per_seed.append(([m[0] if m else None for m in marks], late))
            cols = [f"{m[0]:.2f} ({m[1] / 1000:.0f}k)" if m else "-" for m in marks]
            minutes = round(points[-1]["wall_seconds"] / 60)
            body.append((name, seed, *cols, number(late, ".2f"), minutes))
        if len(per_seed) > 1:  # the seeds' mean, ± its standard error
            cols = [mean_and_error([figures[i] for figures, _ in per_seed]) for i in range(len(MARKS))]
            body.append((name, f"mean of {len(per_seed)}", *cols, mean_and_error([late for _, late in per_seed]), "-"))
    dqn = ("DQN (MinAtar paper)", "-", *(number(dqn_at("breakout", m), ".1f") for m in MARKS), "-", "-")
    late = f"mean of the evaluations {LATE // 1000}k-{MARKS[-1] // 1000}k"
    header = ("cell", "seed", *(f"return at {m // 1000}k (env steps)" for m in MARKS), late, "wall minutes")
    return markdown_table(header, [*body, dqn])


def finish_plot(fig, axis, path: Path, env_steps: int, title: str) -> None:
    """DQN's curve (dashed) to `env_steps`, the axes' labels, and the figure saved to `path`."""
    import matplotlib.pyplot as plt

    dqn = [p for p in DQN_CURVE["breakout"] if p[0] <= env_steps]
    axis.plot([p[0] / 1000 for p in dqn], [p[1] for p in dqn], color="grey", linestyle="--", label="DQN")
    axis.set_xlabel("environment steps (k)")
    axis.set_ylabel("mean greedy return")
    axis.set_title(title)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot(rows: list[dict], path: Path, env_steps: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(7, 4.2))
    # One colour and one legend entry per cell, whatever its seeds; 40 colours, not the default
    # 10, so that no two of the ablation's cells share one.
    colors = plt.get_cmap("tab20").colors + plt.get_cmap("tab20b").colors
    for index, name in enumerate(dict.fromkeys(r["cell"] for r in rows)):
        for run, points in enumerate(seed_runs(rows, name).values()):
            axis.plot(
                [p["env_steps"] / 1000 for p in points],
                [p["mean_return"] for p in points],
                marker="o",
                markersize=3,
                color=colors[index % len(colors)],
                label=name if run == 0 else None,
            )
    finish_plot(fig, axis, path, env_steps, "MinAtar Breakout: EfficientZero's pieces, 2-core CPU")


def seed_means(rows: list[dict], name: str) -> list[tuple[float, float, float]] | None:
    """(env steps, mean return, its standard error) over the seeds of cell `name`, evaluation by
    evaluation (the i-th of each seed: they fall within a few hundred environment steps of each
    other), as far as every seed reached; None for a cell run on one seed."""
    runs = seed_runs(rows, name)
    if len(runs) < 2:
        return None
    means = []
    for points in zip(*runs.values()):
        returns = [p["mean_return"] for p in points]
        error = statistics.stdev(returns) / math.sqrt(len(returns))
        means.append((statistics.fmean(p["env_steps"] for p in points), statistics.fmean(returns), error))
    return means


def plot_seeds(rows: list[dict], path: Path, env_steps: int) -> None:
    """The cells run on several seeds: each seed thin, their mean thick with a band of ± one
    standard error, DQN's curve dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(7, 4.2))
    for name in dict.fromkeys(r["cell"] for r in rows):
        means = seed_means(rows, name)
        if means is None:
            continue
        steps = [m[0] / 1000 for m in means]
        (line,) = axis.plot(steps, [m[1] for m in means], marker="o", markersize=3, linewidth=2)
        runs = seed_runs(rows, name)
        line.set_label(f"{name}, mean of {len(runs)} seeds ± s.e.")
        low, high = [m[1] - m[2] for m in means], [m[1] + m[2] for m in means]
        axis.fill_between(steps, low, high, color=line.get_color(), alpha=0.15)
        for points in runs.values():
            axis.plot(
                [p["env_steps"] / 1000 for p in points],
                [p["mean_return"] for p in points],
                color=line.get_color(),
                linewidth=0.7,
                alpha=0.5,
            )
    finish_plot(fig, axis, path, env_steps, "MinAtar Breakout: cells on several seeds (thin: each seed), 2-core CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", nargs="+", choices=list(CELLS), default=list(CELLS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--env-steps", type=int, default=MARKS[-1], help="environment steps per run")
    parser.add_argument("--eval-every", type=int, default=50_000, help="environment steps between evaluations")
    parser.add_argument("--episodes", type=int, default=100, help="greedy episodes per evaluation")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_ablation")
    parser.add_argument("--keep", type=Path, default=ROOT / "docs" / "ablation", help="finished cells' eval.csv")
    parser.add_argument("--read-only", action="store_true", help="train nothing: table and plot of the kept cells")
    args = parser.parse_args()
    rows = []
    for name in args.cells:
        for seed in args.seeds:
            rows += run_cell(name, seed, args)
            args.out.mkdir(parents=True, exist_ok=True)
            write_csv(args.out / "curves.csv", rows)
            (args.out / "table.md").write_text(table(rows, args.cells, args.seeds) + "\n")
            plot(rows, args.out / "curves.png", args.env_steps)
            plot_seeds(rows, args.out / "seeds.png", args.env_steps)
    print((args.out / "table.md").read_text())


if __name__ == "__main__":
    main()
