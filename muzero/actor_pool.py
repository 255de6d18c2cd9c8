"""A pool of Ray actors seen from the driver: calls out, results in, faults handled.

Shared by the self-play actors (`muzero.actors`) and the reanalyse actors
(`muzero.reanalyse_actors`); each subclass says what one call is.

* Calls: the driver hands an actor a call only when it has a free slot (at most
  `actors.max_inflight_per_actor`), so the work outside the driver stays bounded.
* Each published network is `ray.put` once (`put_network`); calls carry its reference in a
  list, so an actor fetches it (`fetch_network`) only when the version is new to it.
* Faults: Ray restarts a dead actor (`actors.max_restarts`); the driver sees the failed
  call (or a result from a new process), counts the restart, and sends the new
  incarnation's number with the next calls. A call that outlives
  `actors.call_timeout_seconds` is taken for a hung actor, which is killed and so
  restarted. Every wait has a timeout, so the driver never blocks on a dead actor.

Ray is imported here only inside functions: `--backend local` never imports it.
"""

from __future__ import annotations

import logging as std_logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from absl import logging

from muzero.config import ActorsConfig, ReanalyseConfig
from muzero.networks.base import Network
from muzero.reanalyse import reanalyse_enabled
from muzero.tf_runtime import limit_threads, quiet_tensorflow_cpp

# Longest single wait: stop signals and hung calls are noticed at least this often.
WAIT_SLICE_SECONDS = 1.0


class ClusterError(RuntimeError):
    """Ray could not be started or joined; the message is one line for the user."""


def limit_actor_resources(actors: ActorsConfig, compiled_search: bool) -> None:
    """Before TensorFlow does any work in an actor: thread pools of `actors.cpus_per_actor`
    threads, and no GPU unless the actor was given one (TensorFlow would otherwise map all GPU
    memory). `compiled_search`: the actor searches with TensorFlow (`selfplay.search`)."""
    if actors.gpus_per_actor == 0:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    quiet_tensorflow_cpp()
    if not compiled_search:
        return  # the numpy search never imports TensorFlow
    try:
        limit_threads(max(1, int(actors.cpus_per_actor)), use_gpu=actors.gpus_per_actor > 0)
    except RuntimeError as error:  # TensorFlow already ran in this process (an in-process worker)
        logging.warning(
            "actor: TensorFlow already initialised, thread and device limits not set (%s)", first_line(error)
        )


def fetch_network(weights: list) -> Network:
    """Inside an actor: the network a call carries, [a `Network`] or [its Ray reference]."""
    network = weights[0]
    if not isinstance(network, Network):
        import ray

        network = ray.get(network)
    return network


@dataclass
class Call:
    """One call handed to an actor; `payload`: what the driver keeps about it until it ends."""

    ref: object
    actor_index: int
    incarnation: int
    payload: object = None


@dataclass
class ActorState:
    """The driver's view of one actor."""

    handle: object
    incarnation: int = 0  # restarts handled so far: goes with every call
    deaths: int = 0
    process: str | None = None
    awaiting_new_process: bool = False
    calls: list[Call] = field(default_factory=list)
    clock: float = 0.0  # when the oldest call of this incarnation was seen to start
    results: int = 0  # calls answered


class ActorPool:
    """The driver's handle on `num_actors` actors of `worker_class`.

    A worker class takes (*worker_args, actor_index, start_step), has `ready()` returning
    its process token, and its calls return objects with `process` and `incarnation`.

    Args:
      actors: the `actors` section (restarts, call slots, timeouts, resources).
      worker_class: the actor's class (wrapped with `ray.remote` here).
      worker_args: what `worker_class` takes before (actor_index, start_step): the run's
        config and `EnvironmentSpec`, from which each actor builds its own parts in its process.
      num_actors: how many.
      kind: names the actors in messages ("self-play", "reanalyse").
      address: a Ray cluster to join (`ray start --head` prints it); None starts a
        local one sized for all the run's actors.
      cluster_cpus: CPUs all the run's actors ask for (`cluster_cpus`); None: this pool's.
    """

    def __init__(
        self,
        actors: ActorsConfig,
        worker_class: type,
        worker_args: tuple,
        num_actors: int,
        kind: str,
        address: str | None = None,
        cluster_cpus: float | None = None,
    ):
        self.actors_config, self.address = actors, address
        self.worker_class, self.worker_args = worker_class, worker_args
        self.num_actors, self.kind = num_actors, kind
        self.actors: list[ActorState] = []
        self.weights_step = -1
        self.weights_ref = None
        self.restart_events = 0
        connect(address, num_actors * actors.cpus_per_actor if cluster_cpus is None else cluster_cpus)

    # ----- weights out -----

    def put_network(self, step: int, network: Network) -> None:
        """Puts a network version into the object store, once per version; the next calls
        carry its reference (`weights_ref`)."""
        if step == self.weights_step:
            return
        import ray

        self.weights_ref = ray.put(network)
        self.weights_step = step

    # ----- work out -----

    def start(self, start_step: int, should_stop: Callable[[], bool] = lambda: False) -> None:
        """Creates the actors (once) and waits, at most `actors.call_timeout_seconds`, until
        each is up, so that all of them work from the first call. `start_step` goes into
        their seeds."""
        if self.actors:
            return
        import ray

        actors_cfg = self.actors_config
        # No task retries: after a restart the driver resubmits, with the newest weights and
        # the new restart count. (Calls queued at the moment of a restart may still run on
        # the new process; its result then shows the new process, and the restart is counted.)
        remote = ray.remote(self.worker_class).options(
            num_cpus=actors_cfg.cpus_per_actor,
            num_gpus=actors_cfg.gpus_per_actor,
            max_restarts=actors_cfg.max_restarts,
            max_task_retries=0,
            # Set before the worker process starts: TensorFlow reads it when first imported.
            runtime_env={"env_vars": {"TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}},
        )
        self.actors = [ActorState(remote.remote(*self.worker_args, i, start_step)) for i in range(self.num_actors)]
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
        logging.info(
            "%d %s actors up in %.1fs (%s)%s",
            self.num_actors - len(pending),
            self.kind,
            time.time() - started,
            self.describe(),
            f"; {len(pending)} not up yet" if pending else "",
        )

    def describe(self) -> str:
        """What each actor does, for the start-up line."""
        return f"{self.actors_config.max_inflight_per_actor} calls in flight each"

    def free_slots(self) -> list[int]:
        """Indices of live actors with room for another call, one entry per free slot."""
        return [
            index
            for index, actor in enumerate(self.actors)
            if not self._dead(actor)
            for _ in range(self.actors_config.max_inflight_per_actor - len(actor.calls))
        ]

    def send(self, index: int, ref: object, payload: object = None) -> None:
        """Records a call just handed to actor `index` (its result: `ref`)."""
        actor = self.actors[index]
        if not self._current_calls(actor):
            actor.clock = time.time()
        actor.calls.append(Call(ref, index, actor.incarnation, payload))

    # ----- results in -----

    def collect(self, should_stop: Callable[[], bool] = lambda: False, block: bool = True) -> list:
        """Every finished call's result; with `block`, waits until at least one call finished
        (or none can).

        Failed calls are handled as faults (counted, the actor restarted); a call
        running past `actors.call_timeout_seconds` gets its actor killed and restarted.
        Returns early, possibly with nothing, when `should_stop()` or no call is pending.
        """
        import ray

        results: list = []
        while True:
            calls = {call.ref: call for actor in self.actors for call in actor.calls}
            if not calls:
                return results
            # Finished calls first, hung ones after: a driver that looked away for longer than
            # the timeout (a learner catching up on a long warm-up) finds its calls done, not hung.
            # Finished anywhere counts (fetch_local=False): a result still on another node is
            # fetched by `_finish`, within the timeout.
            ready, _ = ray.wait(list(calls), num_returns=len(calls), timeout=0, fetch_local=False)
            for ref in ready:
                results.extend(self._finish(calls[ref]))
            self._kill_hung()
            if results or should_stop() or not block:
                return results
            # Until the first call finishes (or a time slice ends); the loop then takes it.
            pending = [call.ref for actor in self.actors for call in actor.calls]
            if pending:
                ray.wait(pending, num_returns=1, timeout=self._wait_seconds())

    def _finish(self, call: Call) -> list:
        import ray

        actor = self.actors[call.actor_index]
        actor.calls.remove(call)
        now = time.time()
        if self._current_calls(actor):
            actor.clock = now  # the next call of this actor starts now, at the latest
        try:
            # Ready means finished: this returns at once for a result in the local object store;
            # one on another node, or lost since (Ray may try to rebuild it), within the timeout.
            result = ray.get(call.ref, timeout=self.actors_config.call_timeout_seconds)
        except ray.exceptions.GetTimeoutError:
            logging.warning(
                "%s actor %d: a finished call's result could not be fetched; dropped", self.kind, call.actor_index
            )
            return []
        except ray.exceptions.ActorUnavailableError:
            # Unreachable for a moment (a real restart shows as a new process). The call's
            # result is this error: what it produced, if it ran, is not recoverable.
            logging.warning(
                "%s actor %d was unreachable; the result of one call may be lost", self.kind, call.actor_index
            )
            return []
        except ray.exceptions.RayActorError as error:
            self._on_death(call, f"died ({first_line(error)})", kill=False)
            return []
        except ray.exceptions.RayError as error:  # the call raised, or its result is lost
            self._on_death(call, f"failed ({first_line(error)})", kill=True)
            return []
        if result.process != actor.process:
            if actor.process is not None and not actor.awaiting_new_process:
                self._on_death(call, "was restarted (a new process answered)", kill=False)
            actor.process, actor.awaiting_new_process = result.process, False
        actor.results += 1
        return [result]

    def _on_death(self, call: Call, what: str, kill: bool) -> None:
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
            logging.warning(
                "%s actor %d %s; restarts used up (actors.max_restarts=%d)",
                self.kind,
                call.actor_index,
                what,
                self.actors_config.max_restarts,
            )
        else:
            self.restart_events += 1
            logging.warning(
                "%s actor %d %s; restarted (%d restarts so far)", self.kind, call.actor_index, what, self.restart_events
            )

    def _kill_hung(self) -> None:
        timeout = self.actors_config.call_timeout_seconds
        now = time.time()
        for actor in self.actors:
            current = self._current_calls(actor)
            if current and now - actor.clock > timeout:
                self._on_death(current[0], f"hung (a call ran over actors.call_timeout_seconds={timeout:g})", kill=True)

    def _wait_seconds(self) -> float:
        """Until the next hung-call deadline, at most WAIT_SLICE_SECONDS."""
        deadlines = [
            actor.clock + self.actors_config.call_timeout_seconds for actor in self.actors if self._current_calls(actor)
        ]
        return max(0.0, min([WAIT_SLICE_SECONDS, *(d - time.time() for d in deadlines)]))

    def _current_calls(self, actor: ActorState) -> list[Call]:
        return [call for call in actor.calls if call.incarnation == actor.incarnation]

    def _dead(self, actor: ActorState) -> bool:
        limit = self.actors_config.max_restarts
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

    def payloads(self) -> list:
        """The payloads of the calls handed out and not yet collected."""
        return [call.payload for actor in self.actors for call in actor.calls]

    def close(self, shutdown: bool = True) -> None:
        """Kills the actors; with `shutdown`, leaves the cluster (stopping it when it was
        started here)."""
        import ray

        try:
            for actor in self.actors:
                ray.kill(actor.handle, no_restart=True)
        except Exception as error:  # noqa: BLE001 - the cluster may be gone already (Ctrl-C)
            logging.warning("stopping the %s actors: %s", self.kind, first_line(error))
        if shutdown:
            ray.shutdown()


def cluster_cpus(actors: ActorsConfig, reanalyse: ReanalyseConfig) -> float:
    """CPUs all the run's actors ask for: self-play, and reanalyse when it is on."""
    count = actors.num_actors + (reanalyse.num_actors if reanalyse_enabled(reanalyse) else 0)
    return count * actors.cpus_per_actor


def connect(address: str | None, needed: float) -> None:
    """Joins the Ray cluster at `address`, or starts a local one with at least `needed` CPUs
    (once per process).

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

    if ray.is_initialized():
        return  # the other pool of this run connected already
    try:
        if address:
            ray.init(address=address, logging_level=std_logging.WARNING)
        else:
            # All actors must fit, or the missing ones would wait for CPUs forever.
            ray.init(
                num_cpus=max(os.cpu_count() or 1, int(np.ceil(needed))),
                include_dashboard=False,
                logging_level=std_logging.WARNING,
            )
    except (ConnectionError, RuntimeError, ValueError) as error:
        where = f"--ray-address {address}" if address else "--backend ray"
        raise ClusterError(
            f"{where}: cannot {'join' if address else 'start'} a Ray cluster ({first_line(error)})"
        ) from None
    available = ray.cluster_resources().get("CPU", 0.0)
    if available < needed:
        logging.warning(
            "the Ray cluster has %g CPUs, the run's actors ask for %g: some will wait for CPUs", available, needed
        )


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
        raise ClusterError(
            f"--ray-address {address}: no Ray cluster answers there "
            f"({error.strerror or type(error).__name__}); start one with `ray start --head`"
        ) from None


def _has_auth_token() -> bool:
    """Whether Ray would find an authentication token (environment, or its default file)."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.join(os.path.expanduser("~"), ".ray", "auth_token")
    return os.path.isfile(path)


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
