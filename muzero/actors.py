"""Self-play actors on Ray: the `--backend ray` side of the training run.

The pseudocode runs many `run_selfplay` actors beside one `train_network` learner,
talking through `SharedStorage` (networks) and `ReplayBuffer` (games). Here:

* Each actor (`SelfPlayWorker` as a Ray actor) plays `selfplay.num_envs` games in
  lockstep with the batched search, `actors.moves_per_call` moves per call, and
  returns the games that ended during the call: whole games, never single moves.
* The learner, `SharedStorage` and the replay buffer stay on the driver
  (`SelfPlayActors` is the driver's handle). The learner samples replay every
  training step; a replay actor would turn each sample into a remote call and a
  copy of the batch, and its memory would be a second process to watch. On the
  driver the learner reads it in place, and it is checkpointed with the learner.
* Backpressure: the driver hands out a call only when it has a free slot (at most
  `actors.max_inflight_per_actor` per actor) and the learner has caught up with
  `train.steps_per_move`; finished calls wait in the object store until collected.
  So the games outside replay are bounded, however slow the learner.
* Faults (`muzero.actor_pool.ActorPool`, shared with the reanalyse actors): after a
  restart the next call starts fresh games from seeds (run seed, actor index, restart
  count, start step) with the newest weights.

Ray is imported here only inside functions: `--backend local` never imports it.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from muzero.actor_pool import (
    ActorPool,
    ClusterError,
    check_address,
    cluster_cpus,
    connect,
    fetch_network,
    limit_actor_resources,
)
from muzero.config import ActorsConfig, MuZeroConfig
from muzero.envs import EnvironmentSpec, make_environments
from muzero.factories import make_batched_selfplay, make_run_searcher
from muzero.game import Game
from muzero.networks.base import Network
from muzero.search import Searcher
from muzero.selfplay import BatchedSelfPlay, SelfPlaySource, SelfPlayStopped
from muzero.storage import SharedStorage

# The command line reports cluster errors through these.
__all__ = [
    "ClusterError",
    "PlayResult",
    "RaySelfPlay",
    "SelfPlayActors",
    "SelfPlayWorker",
    "actor_seeds",
    "check_address",
    "cluster_cpus",
    "connect",
]


@dataclass
class PlayResult:
    """What one call of `SelfPlayWorker.play` returns.

    Attributes:
      actor_index: which actor played.
      incarnation: the restart count the driver sent with the call.
      process: "pid-random", unique to the actor's process (a new one after a restart).
      games: the games that ended during the call, detached from their environments.
      moves: moves played in all the actor's games during the call.
      weights_step: training step of the network the moves were searched with.
      idle_seconds: how long the actor waited for this call since it finished its last one
        (self-play waiting for the learner: the driver hands out calls only when the learner
        has caught up with `train.steps_per_move`).
    """

    actor_index: int
    incarnation: int
    process: str
    games: list[Game]
    moves: int
    weights_step: int
    idle_seconds: float = 0.0


def actor_seeds(seed: int, actor_index: int, incarnation: int, start_step: int) -> tuple[int, np.random.Generator]:
    """(environment seed, RNG) for one actor incarnation, distinct and reproducible.

    The start step makes a resumed run's actors play other episodes than the first run's.
    """
    sequence = np.random.SeedSequence([seed, actor_index, incarnation, start_step])
    environments, search = sequence.spawn(2)
    return int(environments.generate_state(1)[0]), np.random.default_rng(search)


class SelfPlayWorker:
    """One self-play actor: `selfplay.num_envs` games in progress, played in calls.

    Plain Python (Ray wraps it with `ray.remote`), so it also runs in-process. A Ray actor is
    a process of its own: it gets the whole config and builds its parts from it, as
    `muzero.builder` does for the driver.

    Args:
      config: validated configuration.
      spec: the game's observation shape and dtype and player count, for the searcher.
      actor_index: 0..num_actors - 1.
      start_step: training step the run started (or resumed) at; part of the seeds.
    """

    def __init__(self, config: MuZeroConfig, spec: EnvironmentSpec, actor_index: int, start_step: int):
        limit_actor_resources(config.actors, config.selfplay.search == "compiled")
        self.config = config
        self.actor_index = actor_index
        self.start_step = start_step
        self.process = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.searcher: Searcher = make_run_searcher(config, spec, config.selfplay.num_envs)
        self.incarnation = -1
        self.selfplay: BatchedSelfPlay | None = None
        self.rng: np.random.Generator | None = None
        self.network: Network | None = None
        self.weights_step = -1
        self.last_call_end: float | None = None

    def _start_games(self, incarnation: int) -> None:
        config = self.config
        seed, self.rng = actor_seeds(config.run.seed, self.actor_index, incarnation, self.start_step)
        environments = make_environments(config.game, config.selfplay.num_envs, seed)
        self.selfplay = make_batched_selfplay(config, environments, self.searcher)
        self.incarnation = incarnation

    def ready(self) -> str:
        """The process token, once the actor is up."""
        return self.process

    def play(self, incarnation: int, weights_step: int, weights: list, moves: int) -> PlayResult:
        """Plays `moves` moves in each game in progress; returns the games that ended.

        Args:
          incarnation: the driver's restart count for this actor; a new value starts
            fresh games from new seeds.
          weights_step: training step of the published network.
          weights: [the published `Network`, or a Ray reference to it], fetched only
            when `weights_step` is new to this actor.
          moves: batched moves to play.
        """
        started = time.time()
        idle = 0.0 if self.last_call_end is None else started - self.last_call_end
        if incarnation != self.incarnation:
            self._start_games(incarnation)
        if weights_step != self.weights_step:
            self.network, self.weights_step = fetch_network(weights), weights_step
        games, played = self.selfplay.play(self.network, self.rng, moves)
        self.last_call_end = time.time()
        return PlayResult(self.actor_index, incarnation, self.process, games, played, self.weights_step, idle)


class SelfPlayActors(ActorPool):
    """The driver's handle on the self-play actors: weights out, games in, faults handled.

    Args:
      actors: the `actors` section.
      worker_args: (config, `EnvironmentSpec`): what each `SelfPlayWorker` builds its parts from.
      num_envs: `selfplay.num_envs`, the games in progress in each actor (for the start-up line).
      address: a Ray cluster to join (`ray start --head` prints it); None starts a
        local one sized for the actors.
      cluster_cpus: CPUs all the run's actors ask for (`muzero.actor_pool.cluster_cpus`);
        None: the self-play actors'.
    """

    def __init__(
        self,
        actors: ActorsConfig,
        worker_args: tuple,
        num_envs: int,
        address: str | None = None,
        cluster_cpus: float | None = None,
    ):
        super().__init__(actors, SelfPlayWorker, worker_args, actors.num_actors, "self-play", address, cluster_cpus)
        self.num_envs = num_envs
        self.games = [0] * actors.num_actors

    def describe(self) -> str:
        return (
            f"{self.num_envs} games each, {self.actors_config.moves_per_call} moves per call, "
            f"{self.actors_config.max_inflight_per_actor} calls in flight each"
        )

    def submit(self) -> None:
        """Fills every live actor's free call slots with `moves_per_call` moves of play."""
        for index in self.free_slots():
            actor = self.actors[index]
            self.send(
                index,
                actor.handle.play.remote(
                    actor.incarnation, self.weights_step, [self.weights_ref], self.actors_config.moves_per_call
                ),
            )

    def collect(self, should_stop: Callable[[], bool] = lambda: False, block: bool = True) -> list[PlayResult]:
        results = super().collect(should_stop, block)
        for result in results:
            self.games[result.actor_index] += sum(not game.partial for game in result.games)  # not segments
        return results

    @property
    def games_by_actor(self) -> list[int]:
        return list(self.games)


class RaySelfPlay(SelfPlaySource):
    """The Ray back end as the run's self-play source: the learner has caught up; wait for
    finished calls, hand their games to replay, and refill the actors' call slots so they
    play while the learner trains.

    Backpressure: calls are only handed out here, so the actors run at most
    `actors.max_inflight_per_actor` calls ahead of a learner slower than them. Games in
    progress inside the actors are not checkpointed: after a resume the actors start new ones.

    Args: as `SelfPlayActors`.
    """

    concurrent = True

    def __init__(
        self,
        actors: ActorsConfig,
        worker_args: tuple,
        num_envs: int,
        address: str | None = None,
        cluster_cpus: float | None = None,
    ):
        self.actors = SelfPlayActors(actors, worker_args, num_envs, address, cluster_cpus)
        # Who waited for whom, summed since the start (`metrics` reports shares of wall time).
        self.learner_wait_seconds = 0.0  # the driver blocked in `collect`: the learner had caught up
        self.selfplay_idle_seconds = 0.0  # actors between calls: self-play had run ahead
        self.started = time.time()
        self.window = (self.started, 0.0, 0.0)  # (when, learner wait, self-play idle) at the last `metrics`

    def play(
        self, storage: SharedStorage, rng: np.random.Generator, should_stop: Callable[[], bool], start_step: int
    ) -> tuple[list[Game], int]:
        actors, actors_cfg = self.actors, self.actors.actors_config
        if not actors.actors:
            actors.start(start_step, should_stop=should_stop)
        actors.put_network(storage.latest_step(), storage.latest_network())
        actors.submit()
        started = time.time()
        results = actors.collect(should_stop=should_stop)
        self.learner_wait_seconds += time.time() - started
        self.selfplay_idle_seconds += sum(result.idle_seconds for result in results)
        actors.submit()
        if actors.live < actors_cfg.min_live_actors:
            raise SelfPlayStopped(
                f"{actors.live} of {actors_cfg.num_actors} self-play actors alive, fewer than "
                f"actors.min_live_actors={actors_cfg.min_live_actors} (restarts used up: "
                f"actors.max_restarts={actors_cfg.max_restarts})"
            )
        return [game for result in results for game in result.games], sum(result.moves for result in results)

    def metrics(self) -> dict[str, float]:
        """Actors' health, and since the last call the share of wall time the learner waited for
        self-play (`loop/learner_wait`) and the actors waited for the learner (`loop/selfplay_wait`,
        per actor)."""
        now = time.time()
        then, learner_wait, selfplay_idle = self.window
        self.window = (now, self.learner_wait_seconds, self.selfplay_idle_seconds)
        span = max(now - then, 1e-9)
        return {
            "actors/restarts": self.actors.restarts,
            "actors/live": self.actors.live,
            "actors/inflight": self.actors.inflight,
            "loop/learner_wait": (self.learner_wait_seconds - learner_wait) / span,
            "loop/selfplay_wait": (self.selfplay_idle_seconds - selfplay_idle) / span / max(self.actors.live, 1),
        }

    def progress(self) -> str:
        elapsed = max(time.time() - self.started, 1e-9)
        return (
            f" | actors {self.actors.live} live, {self.actors.restarts} restarts, "
            f"{self.actors.inflight} calls in flight | waited: learner {self.learner_wait_seconds / elapsed:.0%}, "
            f"self-play {self.selfplay_idle_seconds / elapsed / max(self.actors.live, 1):.0%}"
        )

    def result(self) -> dict:
        return {"actor_restarts": self.actors.restarts, "games_by_actor": self.actors.games_by_actor}

    def close(self) -> None:
        self.actors.close()
