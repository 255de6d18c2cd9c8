"""Reanalyse on Ray actors: the `--backend ray` side of Reanalyse.

The driver keeps replay, so it picks the positions (`reanalyse.select_positions`, those
with the oldest statistics, minus the ones out in calls) and writes the results back
(`ReplayBuffer.store_reanalysis`); `reanalyse.num_actors` actors (`ReanalyseWorker`) run
the batched search on `reanalyse.batch_size` positions per call with the newest
published network. The pool (`muzero.actor_pool.ActorPool`) restarts dead or hung
actors and bounds the calls out, as for self-play.

Budget: as in this process (`LocalReanalyse`), `reanalyse.positions_per_step` positions
per training step, sent a batch at a time. When every call slot is taken the budget is
not banked beyond one batch: the learner does not wait for the actors, and they get no
backlog to work through later.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass

import numpy as np

from muzero.actor_pool import ActorPool, fetch_network, limit_actor_resources
from muzero.config import ActorsConfig, MuZeroConfig, ReanalyseConfig
from muzero.envs import EnvironmentSpec
from muzero.factories import make_run_searcher
from muzero.networks.base import Network
from muzero.reanalyse import (
    REANALYSE_STREAM,
    Positions,
    ReanalyseDriver,
    reanalyse_noise,
    reanalyse_positions,
    select_positions,
)
from muzero.replay import ReplayBuffer
from muzero.search import SearchResult


@dataclass
class ReanalyseResult:
    """What one call of `ReanalyseWorker.reanalyse` returns.

    Attributes:
      actor_index, incarnation, process: which actor answered (see `muzero.actors.PlayResult`).
      rows, layout: the positions' flat replay rows, as the driver sent them.
      result: the search's visit counts [N, A] and root values [N].
      weights_step: training step of the network that searched (replay labels the results with
        the learner's step when they arrive instead: `RayReanalyse.after_training_step`).
    """

    actor_index: int
    incarnation: int
    process: str
    rows: np.ndarray
    layout: int
    result: SearchResult
    weights_step: int


class ReanalyseWorker:
    """One reanalyse actor: a batched searcher for `reanalyse.batch_size` positions.

    Plain Python (Ray wraps it with `ray.remote`), so it also runs in-process. As a process of
    its own it gets the whole config and builds its searcher from it (`muzero.actors.SelfPlayWorker`).
    """

    def __init__(self, config: MuZeroConfig, spec: EnvironmentSpec, actor_index: int, start_step: int):
        limit_actor_resources(config.actors, config.selfplay.search == "compiled")
        self.actor_index = actor_index
        self.process = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.searcher = make_run_searcher(config, spec, config.reanalyse.batch_size)
        self.seed, self.start_step = config.run.seed, start_step
        puct = config.search.algorithm == "puct"  # Gumbel reanalyses without noise (see the builder)
        self.noise_alpha = config.search.root_dirichlet_alpha if config.reanalyse.root_noise and puct else None
        self.symmetries = spec.symmetries if config.search.random_symmetry else ()
        self.network: Network | None = None
        self.weights_step = -1
        self.incarnation = -1
        self.rng: np.random.Generator | None = None

    def ready(self) -> str:
        """The process token, once the actor is up."""
        return self.process

    def reanalyse(self, incarnation: int, weights_step: int, weights: list, positions: Positions) -> ReanalyseResult:
        """Searches `positions` with the published network (`weights`, as in `SelfPlayWorker.play`)."""
        if incarnation != self.incarnation:  # root noise from (seed, stream, actor, restarts, start step)
            self.incarnation = incarnation
            self.rng = np.random.default_rng(
                np.random.SeedSequence([self.seed, REANALYSE_STREAM, self.actor_index, incarnation, self.start_step])
            )
        if weights_step != self.weights_step:
            self.network, self.weights_step = fetch_network(weights), weights_step
        noise = reanalyse_noise(self.noise_alpha, positions, self.rng)
        result = reanalyse_positions(self.searcher, self.network, positions, noise, self.symmetries, self.rng)
        return ReanalyseResult(
            self.actor_index,
            incarnation,
            self.process,
            positions.rows,
            positions.layout,
            result,
            self.weights_step,
        )


class RayReanalyse(ReanalyseDriver):
    """Reanalyse on actors, driven between training steps; the `LocalReanalyse` interface.

    Args:
      reanalyse: the `reanalyse` section (`num_actors`, the budget).
      actors: the `actors` section (restarts, call slots, timeouts, resources).
      worker_args: (config, `EnvironmentSpec`): what each `ReanalyseWorker` builds its searcher from.
      address: the Ray cluster (the self-play actors' one).
      cluster_cpus: as `muzero.actor_pool.ActorPool`'s.
    """

    def __init__(
        self,
        reanalyse: ReanalyseConfig,
        actors: ActorsConfig,
        worker_args: tuple,
        address: str | None = None,
        cluster_cpus: float | None = None,
    ):
        super().__init__(reanalyse)
        self.pool = ActorPool(
            actors, ReanalyseWorker, worker_args, reanalyse.num_actors, "reanalyse", address, cluster_cpus
        )
        self.since = time.perf_counter()

    def after_training_step(self, replay_buffer: ReplayBuffer, network: Network, step: int) -> None:
        """Stores what the actors finished, adds one step's budget and sends whole batches
        to free call slots."""
        if not self._add_budget(network):
            return
        pool = self.pool
        if not pool.actors:
            pool.start(step)
        # Labelled with the learner's step now, not the searching weights' step: games carry
        # the step they reached replay at, and one clock orders both (`positions_to_reanalyse`).
        for answer in pool.collect(block=False):
            self._store(replay_buffer, answer.rows, answer.layout, answer.result, step)
        pool.put_network(network.training_steps(), network)
        slots = pool.free_slots()
        while self.credit >= self.batch_size and slots:
            positions = select_positions(replay_buffer, self.batch_size, exclude=pool.payloads())
            if positions is None:
                break
            index = slots.pop(0)
            actor = pool.actors[index]
            pool.send(
                index,
                actor.handle.reanalyse.remote(actor.incarnation, pool.weights_step, [pool.weights_ref], positions),
                (positions.layout, positions.rows),
            )
            self.credit -= self.batch_size
        if not slots:
            self.credit = min(self.credit, float(self.batch_size))

    def metrics(self, replay_buffer: ReplayBuffer) -> dict[str, float]:
        """`reanalyse/...` summaries since the last call; positions/s over wall time."""
        now = time.perf_counter()
        speed = self.positions / max(now - self.since, 1e-9)
        self.since = now
        return {
            **super().metrics(replay_buffer),
            "reanalyse/positions_per_sec": speed,
            "reanalyse/actor_restarts": self.pool.restarts,
            "reanalyse/actors_live": self.pool.live,
            "reanalyse/inflight": self.pool.inflight,
        }

    def close(self) -> None:
        """Kills the actors (the self-play side leaves the cluster)."""
        self.pool.close(shutdown=False)
