"""MinAtar games from scratch for a wall-time budget: does the image path learn on a CPU?

    python scripts/bench_minatar.py --games breakout space_invaders --minutes 60 [--seeds 0] \
        [--episodes 100] [--eval-interval 1000] [--out runs/bench_minatar] [--set KEY=VALUE ...]

For each game and seed, runs `muzero train --config configs/minatar/<game>.yaml` with a
greedy evaluation of `--episodes` episodes every `--eval-interval` training steps, and
stops it with SIGTERM (the run writes a final checkpoint and exits 0) once it has trained
for `--minutes`: wall time less the time spent evaluating (100-episode evaluations belong
to the benchmark, not to training), as eval.csv's `eval_seconds` counts it. A game whose
run folder already holds an eval.csv is read, not run again.

Writes OUT/curves.csv (every evaluation of every run) and OUT/learning_curves.png: the
mean greedy return against environment steps and against training minutes, one panel
per game, with the DQN result of the MinAtar paper after 5M frames drawn in where known
and, dotted, the mean return of uniformly random moves (100 episodes, measured here).
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml
from benchlib import resume_command, train_command

from muzero.run_dir import CONFIG_FILE, EVAL_FILE

ROOT = Path(__file__).resolve().parents[1]
GAMES = ("breakout", "space_invaders", "asterix", "freeway", "seaquest")
# configs/minatar/breakout.yaml as the Gumbel and ablation benchmarks measured it: 0.1 training
# steps per move, the learning rate's decay over 50,000 steps; twice the training became its
# default on 2026-11-27 (docs/sample_efficiency_breakout.md, `more_training`). Their cells start from
# these, so that the cells kept in docs/ and the cells run since compare.
BREAKOUT_AS_MEASURED = ["train.steps_per_move=0.1", "train.lr_decay_steps=50000"]
# DQN's learning curves in the MinAtar paper (Young & Tian 2019, figure 2: the moving average
# of training returns over 100 episodes, epsilon 0.1, mean of 30 runs), as (environment steps,
# return): digitised from the figure as the MinAtar repository ships it
# (img/learning_curves.gif, commit 4241f24): the DQN line's pixels, median per pixel column,
# averaged over 17 columns (0.12M frames) around each point, mapped through the axes' ticks
# (worst tick fit 0.14 return). Asterix at 0.1M is hidden under another curve. A MinAtar frame
# is one environment step (no frame skip).
DQN_CURVE = {
    "breakout": [(1e5, 4.3), (2.5e5, 6.7), (5e5, 8.3), (1e6, 9.2), (2e6, 9.7), (3e6, 10.0), (5e6, 10.0)],
    "space_invaders": [(1e5, 16.1), (2.5e5, 21.7), (5e5, 27.9), (1e6, 32.8), (2e6, 41.2), (3e6, 43.8), (5e6, 43.4)],
    "asterix": [(2.5e5, 0.8), (5e5, 1.0), (1e6, 7.2), (2e6, 14.3), (3e6, 15.6), (5e6, 17.2)],
    "freeway": [(1e5, 5.6), (2.5e5, 7.3), (5e5, 34.3), (1e6, 47.8), (2e6, 50.7), (3e6, 50.2), (5e6, 50.2)],
    "seaquest": [(1e5, 0.6), (2.5e5, 0.8), (5e5, 0.9), (1e6, 1.0), (2e6, 4.9), (3e6, 12.9), (5e6, 20.3)],
}
DQN_5M = {game: points[-1][1] for game, points in DQN_CURVE.items()}


def dqn_at(game: str, env_steps: float) -> float | None:
    """DQN's return at `env_steps` on its curve (linear between the points); None off the curve."""
    points = DQN_CURVE.get(game, [])
    if not points or not points[0][0] <= env_steps <= points[-1][0]:
        return None
    steps, returns = zip(*points)
    return float(np.interp(env_steps, steps, returns))


COLUMNS = [
    "game",
    "seed",
    "training_step",
    "env_steps",
    "wall_seconds",
    "eval_seconds",
    "training_minutes",
    "mean_return",
    "std_return",
    "episodes",
]


def dqn_points(game: str, reach: float) -> list[tuple[float, float]]:
    """DQN's curve of `game` to its first point at or past `reach` environment steps (all of it
    when none is): what a plot of runs to `reach` draws beside them. A run stops at its first
    evaluation past a round number (500,080 for 500k), so a point within 1% short of `reach`
    counts as reached."""
    points = DQN_CURVE[game]
    beyond = [i for i, (steps, _) in enumerate(points) if steps >= 0.99 * reach]
    return points[: (beyond[0] if beyond else len(points) - 1) + 1]


def plot_dqn_curve(axis, game: str, reach: float) -> None:
    """DQN's curve of `game` (`dqn_points`, dashed grey) on a matplotlib axis of environment steps."""
    points = dqn_points(game, reach)
    axis.plot(
        [steps for steps, _ in points],
        [value for _, value in points],
        color="grey",
        linestyle="--",
        marker="s",
        markersize=3,
        linewidth=1,
        label="DQN (Young & Tian 2019, training returns)",
    )


def train(game: str, seed: int, run_dir: Path, args: argparse.Namespace) -> None:
    """One run of `muzero train`, stopped with SIGTERM after `args.minutes` of training."""
    settings = [f"run.eval_episodes={args.episodes}", f"run.eval_interval={args.eval_interval}", *args.set]
    command = train_command(ROOT / "configs" / "minatar" / f"{game}.yaml", run_dir, seed, settings)
    print(f"{game} seed {seed}: {' '.join(command[2:])}", flush=True)
    process = subprocess.Popen(command, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    started = time.time()
    try:
        while process.poll() is None:
            # The budget is training time: evaluations so far (eval.csv) are added to it.
            if time.time() - started - evaluation_seconds(run_dir) >= args.minutes * 60:
                process.send_signal(signal.SIGTERM)
                process.wait()
                break
            time.sleep(2)
    except KeyboardInterrupt:
        process.send_signal(signal.SIGTERM)
        process.wait()
        raise
    if process.returncode != 0:
        raise SystemExit(f"{game} seed {seed}: muzero train exited with status {process.returncode}")


def steps_per_move(config: Path, settings: list[str]) -> float:
    """`train.steps_per_move` of `config` with the `--set` `settings`: a run to E environment
    steps trains E times this many steps."""
    sys.path.insert(0, str(ROOT))
    from muzero.config_loader import load_config

    return load_config(config, list(settings)).train.steps_per_move


def finished(run_dir: Path, training_steps: int) -> bool:
    """Whether the run folder's last evaluation is at `training_steps` or past it."""
    rows = read_eval(run_dir)
    return bool(rows) and int(rows[-1]["training_step"]) >= training_steps


def train_to(config: Path, run_dir: Path, seed: int, settings: list[str], training_steps: int) -> None:
    """One run of `muzero train` to `training_steps` (its `train.training_steps`), or nothing when
    the run folder's last evaluation is there already; a run folder cut short continues with
    `--resume` (its own config: `settings` apply to a fresh run only)."""
    if finished(run_dir, training_steps):
        print(f"{run_dir.name}: finished before, read", flush=True)
        return
    if run_dir.exists():
        command = resume_command(run_dir)
    else:
        command = train_command(config, run_dir, seed, [*settings, f"train.training_steps={training_steps}"])
    print(f"{run_dir.name}: {' '.join(command[2:])}", flush=True)
    subprocess.run(command, check=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def train_kept(config: Path, run_dir: Path, kept: Path, seed: int, settings: list[str], training_steps: int) -> None:
    """`train_to`, unless `kept` holds the finished run's eval.csv; a run that finishes leaves its
    eval.csv and config.yaml in `kept` (a folder under docs/, committed: a later session's runs/
    starts empty)."""
    if finished(kept, training_steps):
        print(f"{run_dir.name}: kept in {kept}, read", flush=True)
        return
    train_to(config, run_dir, seed, settings, training_steps)
    kept.mkdir(parents=True, exist_ok=True)
    for name in (EVAL_FILE, CONFIG_FILE):
        shutil.copy2(run_dir / name, kept / name)


def evaluation_seconds(run_dir: Path) -> float:
    rows = read_eval(run_dir)
    return float(rows[-1]["eval_seconds"]) if rows else 0.0


def read_eval(run_dir: Path) -> list[dict]:
    path = run_dir / EVAL_FILE
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def eval_episodes(run_dir: Path) -> int | None:
    """The greedy episodes of each of the run's evaluations (its config.yaml's `run.eval_episodes`)."""
    path = run_dir / CONFIG_FILE
    if not path.is_file():
        return None
    return (yaml.safe_load(path.read_text()).get("run") or {}).get("eval_episodes")


def curve(game: str, seed: int, run_dir: Path) -> list[dict]:
    """The run's evaluations as rows of COLUMNS."""
    rows, episodes = [], eval_episodes(run_dir)
    for row in read_eval(run_dir):
        wall, evaluating = float(row["wall_seconds"]), float(row["eval_seconds"])
        rows.append(
            {
                "game": game,
                "seed": seed,
                "training_step": int(row["training_step"]),
                "env_steps": int(row["env_steps"]),
                "wall_seconds": wall,
                "eval_seconds": evaluating,
                "training_minutes": round((wall - evaluating) / 60, 2),
                "mean_return": float(row["mean_return"]),
                "std_return": float(row["std_return"]),
                "episodes": episodes,
            }
        )
    return rows


def random_policy_return(game: str, episodes: int = 100, seed: int = 0, overrides: list[str] | None = None) -> float:
    """Mean return of uniformly random moves over `episodes` episodes: the floor a learner must clear.

    The game is played as the runs play it (the shipped config with the benchmark's `--set`
    `overrides`: sticky actions, difficulty ramping, `game.max_moves`), through the same
    environment class as training.
    """
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from muzero.config_loader import load_config
    from muzero.envs.minatar import MinAtarEnvironment

    config = load_config(ROOT / "configs" / "minatar" / f"{game}.yaml", list(overrides or []))
    environment = MinAtarEnvironment(game, seed, config.game.kwargs)  # parsed to MinAtarSettings
    rng = np.random.default_rng(seed)
    total = 0.0
    for _ in range(episodes):
        environment.reset()
        for _ in range(config.game.max_moves):
            _, reward, terminated, truncated = environment.step(int(rng.choice(environment.legal_actions())))
            total += reward
            if terminated or truncated:
                break
    return total / episodes


def plot(rows: list[dict], games: list[str], path: Path, title: str, floors: dict | None = None) -> None:
    """Mean greedy return against environment steps (left) and training minutes (right), a row per game.

    `floors`: the random policy's mean return per game (`random_policy_return`), drawn dotted.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(len(games), 2, figsize=(11, 3.2 * len(games)), squeeze=False)
    for (by_steps, by_time), game in zip(axes, games):
        for seed in sorted({row["seed"] for row in rows if row["game"] == game}):
            points = [row for row in rows if row["game"] == game and row["seed"] == seed]
            for axis, key in ((by_steps, "env_steps"), (by_time, "training_minutes")):
                axis.plot(
                    [p[key] for p in points],
                    [p["mean_return"] for p in points],
                    marker="o",
                    markersize=3,
                    label=f"MuZero, seed {seed}",
                )
        if game in DQN_CURVE:
            # On environment steps, DQN's curve to its first point past the longest run; on minutes, its 5M result.
            plot_dqn_curve(by_steps, game, max([row["env_steps"] for row in rows if row["game"] == game], default=0))
            by_time.axhline(
                DQN_5M[game], color="grey", linestyle="--", linewidth=1, label="DQN after 5M frames (Young & Tian 2019)"
            )
        for axis in (by_steps, by_time):
            if floors and game in floors:
                axis.axhline(floors[game], color="grey", linestyle=":", linewidth=1, label="uniform random policy")
            axis.grid(alpha=0.3)
            axis.set_title(game, fontsize=10)
        by_steps.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x / 1000:g}k"))
        by_steps.set_xlabel("environment steps (self-play moves)")
        by_time.set_xlabel("training minutes (evaluations excluded)")
        by_steps.set_ylabel("mean greedy return")
        by_steps.legend(loc="upper left", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--games",
        nargs="+",
        default=["breakout", "space_invaders"],
        metavar="GAME",
        help=f"any of {', '.join(GAMES)} (default: %(default)s)",
    )
    parser.add_argument("--minutes", type=float, default=60.0, help="training minutes per run (default: %(default)s)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--episodes", type=int, default=100, help="greedy episodes per evaluation")
    parser.add_argument("--eval-interval", type=int, default=1000, help="training steps between evaluations")
    parser.add_argument("--out", type=Path, default=Path("runs/bench_minatar"))
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="config override for every run (repeatable)"
    )
    args = parser.parse_args()
    unknown = [game for game in args.games if game not in GAMES]
    problems = [f"--games: unknown {', '.join(unknown)}; expected any of {', '.join(GAMES)}"] if unknown else []
    problems += [
        f"{name}: expected {bound}, got {value:g}"
        for name, value, bound, ok in (
            ("--minutes", args.minutes, "> 0", args.minutes > 0),
            ("--episodes", args.episodes, ">= 1", args.episodes >= 1),
            ("--eval-interval", args.eval_interval, ">= 1", args.eval_interval >= 1),
        )
        if not ok
    ]
    if problems:
        print(f"bench_minatar.py: error: {problems[0]}", file=sys.stderr)
        return 2

    rows = []
    for game in args.games:
        for seed in args.seeds:
            run_dir = args.out / f"{game}-seed-{seed}"
            if not read_eval(run_dir):
                train(game, seed, run_dir, args)
            rows.extend(curve(game, seed, run_dir))

    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "curves.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    floors = {game: random_policy_return(game, overrides=args.set) for game in args.games}
    print("\nmean greedy return at the last evaluation of each run:")
    print(
        "| game | seed | return | episodes | random policy (100 episodes) | DQN at these env steps | "
        "DQN at 5M frames | env steps | training steps | training min |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for game in args.games:
        for seed in args.seeds:
            points = [row for row in rows if row["game"] == game and row["seed"] == seed]
            if points:
                last = points[-1]
                dqn = dqn_at(game, last["env_steps"])
                print(
                    f"| {game} | {seed} | {last['mean_return']:.1f} +- {last['std_return']:.1f} | {last['episodes'] or '-'} | "
                    f"{floors[game]:.2f} | {'-' if dqn is None else f'{dqn:.1f}'} | {DQN_5M.get(game, '-')} | "
                    f"{last['env_steps']:,} | {last['training_step']:,} | "
                    f"{last['training_minutes']:.0f} |"
                )
    print(f"wrote {args.out / 'curves.csv'}")
    # Runs read from earlier invocations may have been evaluated with other --episodes.
    counts = sorted({row["episodes"] for row in rows}, key=str)
    per_point = f"{counts[0]} episodes per point" if len(counts) == 1 else "episodes per point: curves.csv"
    try:
        plot(
            rows,
            args.games,
            args.out / "learning_curves.png",
            f"MinAtar, {args.minutes:g} training minutes per run: greedy return ({per_point})",
            floors,
        )
        print(f"wrote {args.out / 'learning_curves.png'}")
    except ImportError:
        print("no PNG (is matplotlib installed? pip install -e '.[plot]')")
    return 0


if __name__ == "__main__":
    sys.exit(main())
