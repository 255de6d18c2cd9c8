"""The memory a run will need, estimated before any heavy work, against what the machine has.

Why: nothing else stops a config that cannot fit (a batch of 100 million positions, a
replay window of a million long games) before the kernel kills the process, minutes or
hours in, with no message. The estimate is an upper bound of the three parts that grow
with the config:

* replay: `replay.window_size` games of `game.max_moves` moves each, at `position_bytes`
  per stored move (or, when smaller, `replay.max_bytes` scaled from the arrays it counts to
  the Python objects around them);
* the training batch: B x (K + 1) rows of the network's input image, targets and the
  activations kept for the backward pass;
* the network: its hidden layers' weights, the gradients and SGD's momentum (Adam: 2 slots; small
  beside the others; counted from the layer sizes, not by building it).

Each process of the run (the learner's, and each self-play actor's in the concurrent loop)
adds TensorFlow's own footprint, a constant.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from muzero.config import MuZeroConfig
from muzero.envs import EnvironmentSpec
from muzero.networks.base import image_shape

GIB = 1024**3
# One process with TensorFlow and the project's libraries: resident memory seen with `ps` on
# this project's machine, 0.7-0.85 GB early in CartPole and tic-tac-toe runs, 3.21 GiB for the
# learner and 2 actors at the peak of a 30-minute MinAtar run (1.07 GiB each); with a margin.
PROCESS_BYTES = 5 * GIB // 4
# Ray's own services on the machine (raylet, GCS, agents) in the concurrent loop: 0.41 GB
# resident in `ps` during a MinAtar run here; rounded up.
RAY_SERVICES_BYTES = GIB // 2
# Per stored move, besides its observation: the Python objects of the move's action,
# reward, root value and priority (a float or int object and its list slot, 32 bytes
# each), the visit distribution's list (56 bytes + 32 per action), the numpy array holding
# the observation (112 bytes), and the flat copy replay samples from (8 bytes per action
# plus 40 per move).
_MOVE_OVERHEAD = 4 * 32 + 56 + 112 + 40
_PER_ACTION = 32 + 8


def _observation_bytes(spec: EnvironmentSpec) -> int:
    return int(np.prod(spec.observation_shape)) * np.dtype(spec.observation_dtype).itemsize


def position_bytes(spec: EnvironmentSpec) -> int:
    """Bytes one stored move takes in replay: its observation and its bookkeeping."""
    return _observation_bytes(spec) + _MOVE_OVERHEAD + _PER_ACTION * spec.action_space_size


def counted_position_bytes(spec: EnvironmentSpec) -> int:
    """Bytes of one stored move as `replay.max_bytes` counts them (`muzero.replay.game_nbytes`:
    the arrays, without Python's objects around them)."""
    return _observation_bytes(spec) + 8 * (3 + spec.action_space_size)


@dataclass(frozen=True)
class MemoryEstimate:
    """Upper bounds, in bytes, of what a run holds at its peak."""

    replay: int
    batch: int
    network: int
    runtime: int = PROCESS_BYTES

    @property
    def total(self) -> int:
        return self.replay + self.batch + self.network + self.runtime

    def describe(self) -> str:
        return (
            f"{gib(self.total)} (replay {gib(self.replay)}, training batch {gib(self.batch)}, "
            f"network {gib(self.network)}, processes {gib(self.runtime)})"
        )


def gib(nbytes: float) -> str:
    return f"{nbytes / GIB:.2f} GiB"


def estimate_memory(
    config: MuZeroConfig, spec: EnvironmentSpec, processes: int = 1, ray: bool = False
) -> MemoryEstimate:
    """The run's peak memory, bounded from the config and the game (`muzero.memory` says how);
    `processes`: the learner's and the self-play actors'; `ray`: Ray's services run here too."""
    replay = config.replay.window_size * config.game.max_moves * position_bytes(spec)
    if config.replay.max_bytes:  # counted as arrays: scaled up to the objects that hold them
        replay = min(replay, config.replay.max_bytes * position_bytes(spec) // counted_position_bytes(spec))
    network, stacked = config.network, config.game.stacked_frames
    if network.kind == "resnet":  # the planes over the (downsampled) board or frame
        board = spec.board_shape or image_shape(stacked, spec.observation_shape)
        scale = 256 if network.downsample and len(spec.observation_shape) == 3 else 1  # 96 x 96 -> 6 x 6
        state = max(board[0] * board[1] // scale, 1) * network.planes
        layers = 2 * network.blocks + 4
        weights = layers * 9 * network.planes**2
    else:
        state = max([network.hidden_state_size, *network.hidden_layers])
        layers = 2 * len(network.hidden_layers) + 4
        weights = layers * state * state
    if network.value_prefix:  # the augmented state [latent, h, c, prefix, count] and the LSTM's 4 gates
        state += 2 * network.lstm_hidden_size + 2
        weights += 4 * network.lstm_hidden_size * (state + network.lstm_hidden_size)
    height_width_channels = int(np.prod(image_shape(stacked, spec.observation_shape)))
    train = config.train
    rows = train.batch_size * (train.num_unroll_steps + 1)
    bins = 2 * network.support_size + 1 if network.support_size else 1
    # float32 input image at k = 0 (unroll observations too with the consistency loss), the
    # value and reward supports and the policy, and each layer's activations and their
    # gradients (x 2) through the unroll.
    observations = (
        train.batch_size * height_width_channels * (1 + train.num_unroll_steps * bool(train.consistency_loss_weight))
    )
    batch = 4 * (observations + rows * (2 * bins + spec.action_space_size + 4) + 2 * rows * layers * state)
    runtime = processes * PROCESS_BYTES + (RAY_SERVICES_BYTES if ray else 0)
    copies = 4 if config.train.optimizer == "adam" else 3  # the weights, the gradients and 1 or 2 optimizer slots
    return MemoryEstimate(int(replay), int(batch), int(4 * copies * weights), runtime)


def available_memory(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """The machine's available memory in bytes (Linux's MemAvailable); None where unknown."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def memory_problem(
    config: MuZeroConfig, spec: EnvironmentSpec, available: int | None, processes: int = 1, ray: bool = False
) -> str | None:
    """One line when the estimate exceeds `run.memory_limit` (GiB; 0: `available`), else None."""
    limit = config.run.memory_limit * GIB if config.run.memory_limit else available
    estimate = estimate_memory(config, spec, processes, ray)
    if limit is None or estimate.total <= limit:
        return None
    where = "run.memory_limit" if config.run.memory_limit else "the machine's available memory"
    return (
        f"the run would need up to {estimate.describe()}, more than {where} ({gib(limit)}); "
        "lower train.batch_size, replay.window_size or game.max_moves, or bound replay with replay.max_bytes"
    )
