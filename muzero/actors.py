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
* Each published network is `ray.put` once; calls carry its reference in a list,
  so an actor fetches it (`ray.get`) only when the version is new to it.
* Backpressure: the driver hands out a call only when it has a free slot (at most
  `actors.max_inflight_per_actor` per actor) and the learner has caught up with
  `train.steps_per_move`; finished calls wait in the object store until collected.
  So the games outside replay are bounded, however slow the learner.
* Faults: Ray restarts a dead actor (`actors.max_restarts`); the driver sees the
  failed call (or a result from a new process), counts the restart, and the next
  call starts fresh games from seeds (run seed, actor index, restart count, start
  step) with the newest weights. A call that outlives `actors.call_timeout_seconds`
  is taken for a hung actor, which is killed and so restarted. Every wait has a
  timeout, so the learner never blocks on a dead actor.

Ray is imported here only inside functions: `--backend local` never imports it.
"""

from __future__ import annotations

import logging as std_logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from absl import logging

from muzero.config import MuZeroConfig
from muzero.envs import EnvironmentSpec, make_environments
from muzero.game import Game
from muzero.networks.base import Network
from muzero.search import Searcher, make_searcher
from muzero.selfplay import BatchedSelfPlay, SelfPlaySource, SelfPlayStopped
from muzero.storage import SharedStorage

# Longest single wait: stop signals and hung calls are noticed at least this often.
WAIT_SLICE_SECONDS = 1.0


class ClusterError(RuntimeError):
    """Ray could not be started or joined; the message is one line for the user."""


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
    """

    actor_index: int
    incarnation: int
    process: str
    games: list[Game]
    moves: int
    weights_step: int


def actor_seeds(seed: int, actor_index: int, incarnation: int, start_step: int) -> tuple[int, np.random.Generator]:
    """(environment seed, RNG) for one actor incarnation, distinct and reproducible.

    The start step makes a resumed run's actors play other episodes than the first run's.
    """
    sequence = np.random.SeedSequence([seed, actor_index, incarnation, start_step])
    environments, search = sequence.spawn(2)
    return int(environments.generate_state(1)[0]), np.random.default_rng(search)


def limit_actor_resources(config: MuZeroConfig, threads: int) -> None:
    """Before TensorFlow does any work in an actor: small thread pools, and no GPU
    unless the actor was given one (TensorFlow would otherwise map all GPU memory)."""
    if config.actors.gpus_per_actor == 0:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if config.selfplay.search != "compiled":
        return  # the numpy search never imports TensorFlow
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
        if config.actors.gpus_per_actor == 0:
            tf.config.set_visible_devices([], "GPU")
    except RuntimeError as error:  # TensorFlow already ran in this process (an in-process worker)
        logging.warning("self-play actor: TensorFlow already initialised, thread and device limits not set (%s)",
                        _first_line(error))


class SelfPlayWorker:
    """One self-play actor: `selfplay.num_envs` games in progress, played in calls.

    Plain Python (Ray wraps it with `ray.remote`), so it also runs in-process.

    Args:
      config: validated configuration.
      spec: the game's observation shape and dtype and player count, for the searcher.
      actor_index: 0..num_actors - 1.
      start_step: training step the run started (or resumed) at; part of the seeds.
    """

    def __init__(self, config: MuZeroConfig, spec: EnvironmentSpec, actor_index: int, start_step: int):
        limit_actor_resources(config, max(1, int(config.actors.cpus_per_actor)))
        self.config = config
        self.actor_index = actor_index
        self.start_step = start_step
        self.process = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.searcher: Searcher = make_searcher(config, config.selfplay.num_envs, spec.observation_shape,
                                                spec.observation_dtype, spec.num_players)
        self.incarnation = -1
        self.selfplay: BatchedSelfPlay | None = None
        self.rng: np.random.Generator | None = None
        self.network: Network | None = None
        self.weights_step = -1

    def _start_games(self, incarnation: int) -> None:
        seed, self.rng = actor_seeds(self.config.run.seed, self.actor_index, incarnation, self.start_step)
        environments = make_environments(self.config.game, self.config.selfplay.num_envs, seed)
        self.selfplay = BatchedSelfPlay(self.config, environments, self.searcher)
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
        if incarnation != self.incarnation:
            self._start_games(incarnation)
        if weights_step != self.weights_step:
            network = weights[0]
            if not isinstance(network, Network):
                import ray

                network = ray.get(network)
            self.network, self.weights_step = network, weights_step
        games, played = self.selfplay.play(self.network, self.rng, moves)
        return PlayResult(self.actor_index, incarnation, self.process, games, played, self.weights_step)


@dataclass
class _Call:
    ref: object
    actor_index: int
    incarnation: int


@dataclass
class _ActorState:
    """The driver's view of one actor."""

    handle: object
    incarnation: int = 0  # restarts handled so far: goes with every call
    deaths: int = 0
    process: str | None = None
    awaiting_new_process: bool = False
    calls: list[_Call] = field(default_factory=list)
    clock: float = 0.0  # when the oldest call of this incarnation was seen to start
    games: int = 0


class SelfPlayActors:
    """The driver's handle on the self-play actors: weights out, games in, faults handled.

    Args:
      config: validated configuration (`actors` section).
      spec: what the game is (observation shape and dtype, players).
      address: a Ray cluster to join (`ray start --head` prints it); None starts a
        local one sized for the actors.
    """

    def __init__(self, config: MuZeroConfig, spec: EnvironmentSpec, address: str | None = None):
        self.config = config
        self.spec = spec
        self.address = address
        self.actors: list[_ActorState] = []
        self.weights_step = -1
        self.weights_ref = None
        self.restart_events = 0
        connect(config, address)

    # ----- weights out -----

    def publish(self, step: int, network: Network) -> None:
        """Puts a new network version into the object store, once."""
        if step == self.weights_step:
            return
        import ray

        self.weights_ref = ray.put(network)
        self.weights_step = step

    # ----- work out -----

    def start(self, start_step: int, should_stop: Callable[[], bool] = lambda: False) -> None:
        """Creates the actors (once) and waits, at most `actors.call_timeout_seconds`, until
        each is up, so that all of them play from the first call. `start_step` goes into
        their seeds."""
        if self.actors:
            return
        import ray

        actors_cfg = self.config.actors
        # No task retries: after a restart the driver resubmits, with the newest weights and
        # the new restart count. (Calls queued at the moment of a restart may still run on
        # the new process; its result then shows the new process, and the restart is counted.)
        remote = ray.remote(SelfPlayWorker).options(
            num_cpus=actors_cfg.cpus_per_actor, num_gpus=actors_cfg.gpus_per_actor,
            max_restarts=actors_cfg.max_restarts, max_task_retries=0,
            # Set before the worker process starts: TensorFlow reads it when first imported.
            runtime_env={"env_vars": {"TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}})
        self.actors = [_ActorState(remote.remote(self.config, self.spec, i, start_step))
                       for i in range(actors_cfg.num_actors)]
        started = time.time()
        pending = {actor.handle.ready.remote(): actor for actor in self.actors}
        while pending and time.time() - started < actors_cfg.call_timeout_seconds and not should_stop():
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=WAIT_SLICE_SECONDS)
            for ref in ready:
                actor = pending.pop(ref)
                try:
                    actor.process = ray.get(ref)
                except ray.exceptions.RayError:
                    pass  # its calls will fail, and be handled as faults
        logging.info("%d self-play actors up in %.1fs (%s games each, %d moves per call, %d calls in flight each)%s",
                     actors_cfg.num_actors - len(pending), time.time() - started, self.config.selfplay.num_envs,
                     actors_cfg.moves_per_call, actors_cfg.max_inflight_per_actor,
                     f"; {len(pending)} not up yet" if pending else "")

    def submit(self) -> None:
        """Fills every live actor's free call slots with `moves_per_call` moves of play."""
        now = time.time()
        for index, actor in enumerate(self.actors):
            if self._dead(actor):
                continue
            while len(actor.calls) < self.config.actors.max_inflight_per_actor:
                ref = actor.handle.play.remote(actor.incarnation, self.weights_step, [self.weights_ref],
                                               self.config.actors.moves_per_call)
                if not self._current_calls(actor):
                    actor.clock = now
                actor.calls.append(_Call(ref, index, actor.incarnation))

    # ----- games in -----

    def collect(self, should_stop: Callable[[], bool] = lambda: False) -> list[PlayResult]:
        """Waits until at least one call finished (or none can), and returns every finished one.

        Failed calls are handled as faults (counted, the actor restarted); a call
        running past `actors.call_timeout_seconds` gets its actor killed and restarted.
        Returns early, possibly with nothing, when `should_stop()` or no call is pending.
        """
        import ray

        results: list[PlayResult] = []
        while True:
            self._kill_hung()
            calls = {call.ref: call for actor in self.actors for call in actor.calls}
            if not calls:
                return results
            # The first finished call (or a time slice), then whatever else has finished too.
            ready, _ = ray.wait(list(calls), num_returns=1, timeout=self._wait_seconds())
            if ready:
                ready, _ = ray.wait(list(calls), num_returns=len(calls), timeout=0)
            for ref in ready:
                results.extend(self._finish(calls[ref]))
            if results or should_stop():
                return results

    def _finish(self, call: _Call) -> list[PlayResult]:
        import ray

        actor = self.actors[call.actor_index]
        actor.calls.remove(call)
        now = time.time()
        if self._current_calls(actor):
            actor.clock = now  # the next call of this actor starts now, at the latest
        try:
            # Ready means in the local object store: this returns at once, unless the object
            # was lost since, in which case Ray may try to rebuild it: bounded too.
            result: PlayResult = ray.get(call.ref, timeout=self.config.actors.call_timeout_seconds)
        except ray.exceptions.GetTimeoutError:
            logging.warning("self-play actor %d: a finished call's games could not be fetched; dropped",
                            call.actor_index)
            return []
        except ray.exceptions.ActorUnavailableError:
            # Unreachable for a moment (a real restart shows as a new process). The call's
            # result is this error: games that ended in it, if it ran, are not recoverable.
            logging.warning("self-play actor %d was unreachable; the games of one call may be lost", call.actor_index)
            return []
        except ray.exceptions.RayActorError as error:
            self._on_death(call, f"died ({_first_line(error)})", kill=False)
            return []
        except ray.exceptions.RayError as error:  # the call raised, or its result is lost
            self._on_death(call, f"failed ({_first_line(error)})", kill=True)
            return []
        if result.process != actor.process:
            if actor.process is not None and not actor.awaiting_new_process:
                self._on_death(call, "was restarted (a new process answered)", kill=False)
            actor.process, actor.awaiting_new_process = result.process, False
        actor.games += len(result.games)
        return [result]

    def _on_death(self, call: _Call, what: str, kill: bool) -> None:
        """One fault of one actor incarnation: counted once, however many calls it failed."""
        actor = self.actors[call.actor_index]
        if call.incarnation != actor.incarnation:
            return  # the same fault, already handled
        if kill:
            import ray

            ray.kill(actor.handle, no_restart=False)
        actor.deaths += 1
        actor.incarnation += 1
        actor.awaiting_new_process = True
        if self._dead(actor):
            logging.warning("self-play actor %d %s; restarts used up (actors.max_restarts=%d)",
                            call.actor_index, what, self.config.actors.max_restarts)
        else:
            self.restart_events += 1
            logging.warning("self-play actor %d %s; restarted (%d restarts so far)", call.actor_index, what,
                            self.restart_events)

    def _kill_hung(self) -> None:
        timeout = self.config.actors.call_timeout_seconds
        now = time.time()
        for actor in self.actors:
            current = self._current_calls(actor)
            if current and now - actor.clock > timeout:
                self._on_death(current[0], f"hung (a call ran over actors.call_timeout_seconds={timeout:g})",
                               kill=True)

    def _wait_seconds(self) -> float:
        """Until the next hung-call deadline, at most WAIT_SLICE_SECONDS."""
        deadlines = [actor.clock + self.config.actors.call_timeout_seconds for actor in self.actors
                     if self._current_calls(actor)]
        return max(0.0, min([WAIT_SLICE_SECONDS, *(d - time.time() for d in deadlines)]))

    def _current_calls(self, actor: _ActorState) -> list[_Call]:
        return [call for call in actor.calls if call.incarnation == actor.incarnation]

    def _dead(self, actor: _ActorState) -> bool:
        limit = self.config.actors.max_restarts
        return 0 <= limit < actor.deaths

    # ----- figures -----

    @property
    def live(self) -> int:
        """Actors not given up on (running, or being restarted)."""
        return sum(not self._dead(actor) for actor in self.actors)

    @property
    def restarts(self) -> int:
        """Restarts so far, over all actors."""
        return self.restart_events

    @property
    def inflight(self) -> int:
        """Calls handed out and not yet collected."""
        return sum(len(actor.calls) for actor in self.actors)

    @property
    def games_by_actor(self) -> list[int]:
        return [actor.games for actor in self.actors]

    def close(self) -> None:
        """Kills the actors and leaves the cluster (stopping it when it was started here)."""
        import ray

        try:
            for actor in self.actors:
                ray.kill(actor.handle, no_restart=True)
        except Exception as error:  # noqa: BLE001 - the cluster may be gone already (Ctrl-C)
            logging.warning("stopping the self-play actors: %s", _first_line(error))
        ray.shutdown()


class RaySelfPlay(SelfPlaySource):
    """The Ray back end as the run's self-play source: the learner has caught up; wait for
    finished calls, hand their games to replay, and refill the actors' call slots so they
    play while the learner trains.

    Backpressure: calls are only handed out here, so the actors run at most
    `actors.max_inflight_per_actor` calls ahead of a learner slower than them. Games in
    progress inside the actors are not checkpointed: after a resume the actors start new ones.
    """

    concurrent = True

    def __init__(self, config: MuZeroConfig, spec: EnvironmentSpec, address: str | None = None):
        self.config = config
        self.actors = SelfPlayActors(config, spec, address)

    def play(self, storage: SharedStorage, rng: np.random.Generator, should_stop: Callable[[], bool],
             start_step: int) -> tuple[list[Game], int]:
        actors, actors_cfg = self.actors, self.config.actors
        if not actors.actors:
            actors.start(start_step, should_stop=should_stop)
        actors.publish(storage.latest_step(), storage.latest_network())
        actors.submit()
        results = actors.collect(should_stop=should_stop)
        actors.submit()
        if actors.live < actors_cfg.min_live_actors:
            raise SelfPlayStopped(f"{actors.live} of {actors_cfg.num_actors} self-play actors alive, fewer than "
                                  f"actors.min_live_actors={actors_cfg.min_live_actors} (restarts used up: "
                                  f"actors.max_restarts={actors_cfg.max_restarts})")
        return [game for result in results for game in result.games], sum(result.moves for result in results)

    def metrics(self) -> dict[str, float]:
        return {"actors/restarts": self.actors.restarts, "actors/live": self.actors.live,
                "actors/inflight": self.actors.inflight}

    def progress(self) -> str:
        return (f" | actors {self.actors.live} live, {self.actors.restarts} restarts, "
                f"{self.actors.inflight} calls in flight")

    def result(self) -> dict:
        return {"actor_restarts": self.actors.restarts, "games_by_actor": self.actors.games_by_actor}

    def close(self) -> None:
        self.actors.close()


def connect(config: MuZeroConfig, address: str | None) -> None:
    """Joins the Ray cluster at `address`, or starts a local one.

    Raises:
      ClusterError: the cluster cannot be joined or started.
    """
    if address:
        check_address(address)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address and "RAY_AUTH_MODE" not in os.environ and _has_auth_token():
        # `ray start` turns token authentication on when it finds a token, but Ray 2.60's
        # ray.init(address=...) does not: without this it is refused by its own cluster.
        # (Read when Ray is first imported.)
        os.environ["RAY_AUTH_MODE"] = "token"
    import ray

    actors_cfg = config.actors
    needed = actors_cfg.num_actors * actors_cfg.cpus_per_actor
    try:
        if address:
            ray.init(address=address, logging_level=std_logging.WARNING)
        else:
            # All actors must fit, or the missing ones would wait for CPUs forever.
            ray.init(num_cpus=max(os.cpu_count() or 1, int(np.ceil(needed))), include_dashboard=False,
                     logging_level=std_logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as error:
        where = f"--ray-address {address}" if address else "--backend ray"
        raise ClusterError(f"{where}: cannot {'join' if address else 'start'} a Ray cluster "
                           f"({_first_line(error)})") from None
    available = ray.cluster_resources().get("CPU", 0.0)
    if available < needed:
        logging.warning("the Ray cluster has %g CPUs, the %d actors ask for %g: some will wait for CPUs",
                        available, actors_cfg.num_actors, needed)


def check_address(address: str) -> None:
    """Fails fast when nothing answers at a "host:port" address (ray.init would retry for
    minutes). Other address forms ("auto", "ray://...") are left to Ray.

    Raises:
      ClusterError: the port is closed or the host unknown.
    """
    host, sep, port = address.rpartition(":")
    if not sep or "/" in address or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=10).close()
    except OSError as error:
        raise ClusterError(f"--ray-address {address}: no Ray cluster answers there "
                           f"({error.strerror or type(error).__name__}); start one with `ray start --head`") from None


def _has_auth_token() -> bool:
    """Whether Ray would find an authentication token (environment, or its default file)."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.join(os.path.expanduser("~"), ".ray", "auth_token")
    return os.path.isfile(path)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
