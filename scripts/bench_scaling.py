"""Self-play throughput on Ray actors against the in-process back end, in one run.

    python scripts/bench_scaling.py [--config configs/cartpole.yaml] [--actors 1,2] [--intervals 5]

For the local back end (`BatchedSelfPlay` in this process, as `muzero train` runs it)
and for N Ray actors (a local cluster started here, `muzero.actors.SelfPlayActors`,
no learner), counts self-play moves per second over `--intervals` intervals of
`--interval-seconds` after a warm-up (imports, XLA compilation) and prints the
medians with the scaling efficiency throughput(N) / (N x throughput(1)).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from muzero.config import MuZeroConfig
from muzero.config_loader import load_config


def median_rate(points: list[tuple[float, int]], start: float, interval: float, count: int) -> float:
    """Median moves/s over `count` intervals from `start`, from (time, cumulative moves) points."""
    times = np.array([t for t, _ in points])
    moves = np.array([m for _, m in points])
    rates = []
    for i in range(count):
        # The first and last collection inside the interval bound it (calls arrive in chunks).
        inside = np.flatnonzero((times >= start + i * interval) & (times <= start + (i + 1) * interval))
        if len(inside) >= 2:
            a, b = inside[0], inside[-1]
            rates.append((moves[b] - moves[a]) / (times[b] - times[a]))
    return float(np.median(rates)) if rates else float("nan")


def initial_network(config: MuZeroConfig, spec):
    """The learner's freshly initialised network as self-play sees it (numpy weights)."""
    from muzero.factories import make_run_network

    return make_run_network(config, spec).published_network(0)


def bench_local(config: MuZeroConfig, spec, interval: float, intervals: int) -> float:
    """Moves/s of the local back end: one batched search per move over num_envs games."""
    from muzero.envs import make_environments
    from muzero.factories import make_batched_selfplay, make_run_searcher

    searcher = make_run_searcher(config, spec, config.selfplay.num_envs)
    environments = make_environments(config.game, config.selfplay.num_envs, 0)
    selfplay = make_batched_selfplay(config, environments, searcher)
    network, rng = initial_network(config, spec), np.random.default_rng(0)

    def step() -> int:
        before = selfplay.moves_played
        selfplay.step(network, rng)
        return selfplay.moves_played - before

    for _ in range(3):  # warm-up: compilation
        step()
    points, total, start = [], 0, time.time()
    while time.time() < start + interval * intervals:
        total += step()
        points.append((time.time(), total))
    return median_rate(points, start, interval, intervals)


def bench_ray(config: MuZeroConfig, spec, num_actors: int, interval: float, intervals: int) -> float:
    """Moves/s of `num_actors` self-play actors on a local Ray cluster, games collected on the driver."""
    import dataclasses

    from muzero.actors import SelfPlayActors

    config = config.replace(actors=dataclasses.replace(config.actors, num_actors=num_actors, min_live_actors=1))
    actors = SelfPlayActors(config.actors, (config, spec), config.selfplay.num_envs)
    try:
        actors.start(0)
        actors.put_network(0, initial_network(config, spec))
        answered: set[int] = set()
        while len(answered) < num_actors:  # warm-up: every actor has started and compiled
            actors.submit()
            answered.update(result.actor_index for result in actors.collect())
        points, total, start = [], 0, time.time()
        while time.time() < start + interval * intervals:
            actors.submit()
            total += sum(result.moves for result in actors.collect())
            points.append((time.time(), total))
        return median_rate(points, start, interval, intervals)
    finally:
        actors.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/cartpole.yaml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    parser.add_argument("--actors", default="1,2", help="numbers of Ray actors, comma-separated (must include 1)")
    parser.add_argument("--intervals", type=int, default=5)
    parser.add_argument("--interval-seconds", type=float, default=5.0)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    config = load_config(args.config, args.set)
    from muzero.envs import check_environment

    spec = check_environment(config.game)
    counts = [int(n) for n in args.actors.split(",")]
    rows = [("local (in-process)", 1, bench_local(config, spec, args.interval_seconds, args.intervals))]
    rows += [
        (f"ray, {n} actor{'s' * (n > 1)}", n, bench_ray(config, spec, n, args.interval_seconds, args.intervals))
        for n in counts
    ]
    one = next((rate for name, n, rate in rows if name.startswith("ray") and n == 1), float("nan"))
    print(
        f"{config.game.id}: {config.selfplay.num_envs} games per actor, {config.search.num_simulations} "
        f"simulations, search {config.selfplay.search}, {config.actors.moves_per_call} moves per call; "
        f"{os.cpu_count()} CPUs; medians of {args.intervals} x {args.interval_seconds:g} s"
    )
    print("| back end | actors | moves/s | efficiency throughput(N) / (N x throughput(1)) |")
    print("| --- | --- | --- | --- |")
    for name, n, rate in rows:
        efficiency = f"{rate / (n * one):.2f}" if name.startswith("ray") else ""
        print(f"| {name} | {n} | {rate:,.0f} | {efficiency} |")


if __name__ == "__main__":
    main()
