"""The training loop's throughput against this machine's own arithmetic limit, in one run.

    python scripts/bench_throughput.py [--sections flops,steps,selfplay,loop] [--configs A.yaml ...]
        [--modes local ray] [--seconds 600] [--set KEY=VALUE] [--out runs/bench_throughput]

Prints the machine (CPU model, cores, load average), then one table per section, measured one
after the other (never two timed things at once), and writes OUT/<section>.csv and everything,
the loop runs' samples included, to OUT/results.json:

* flops: the machine's float32 rate on a 1024x1024 @ 1024x1024 matmul and on 3x3 NHWC
  convolutions (SAME: 64 planes at batch 64, and the MinAtar resnet's 16 planes at the
  training batch 64 and the search batch 16), for 1 thread and for all cores
  (`os.cpu_count()`), each thread count in a process of its own (TensorFlow fixes its
  thread pools per process: intra-op N, inter-op 1, set before any op), with and without XLA
  (`tf.function(jit_compile=True)`: XLA's own CPU convolutions against TensorFlow's oneDNN
  kernels). A timed call chains the op (x = op(x, w)) until it does about 0.2 GFLOP, so
  the call's fixed cost stays out of the rate; that cost is printed apart (an empty
  `tf.function` call). GFLOP/s: the median of --repetitions calls after a warm-up call.
  FLOPs: matmul m x k x n = 2mkn; convolution = 2 * B * H_out * W_out * C_out * (kh * kw * C_in).
* steps: one training step of each config. The network and `Learner` come from the
  project's factories (`make_run_network`, `make_learner`), the batch is a synthetic `Batch`
  of the config's shapes (random observations, actions and targets). FLOPs are counted on
  the TensorFlow graph of the function the learner compiles (`update_weights`, forward and
  backward), traced at the batch's fixed shapes: each op's registered "flops" statistic, as
  `tf.compat.v1.profiler`'s float_operation counts them (MatMul 2mkn, Conv2D and both its
  backprops as the formula above, element-wise ops and reductions one per element), over
  the ops that the step's outputs and updates depend on (what runs: the unused input
  gradient of the first layer is left out, as TensorFlow and XLA leave it out). With
  `train.jit_compile` XLA compiles this same graph: it fuses the element-wise ops and runs
  the matmuls and convolutions as counted (checked once, TensorFlow 2.21: the count of
  MatMul and Conv2D* equals the dot and convolution FLOPs of XLA's optimized HLO for
  cartpole, connect4 and breakout). Not counted: the optimizer's update inside the step's
  `tf.cond` (a few FLOPs per parameter). The forward pass alone (`muzero_loss`) is counted
  too: forward + backward should be about 3x it. Times: the median ms of
  `Learner.train_step` (what the loop calls: the batch prepared on the host, the compiled
  step, the metrics fetched) and of the compiled step alone, with XLA and without; the
  achieved GFLOP/s and its fraction of the all-core matmul and 64-plane convolution rates.
* selfplay: moves/s of each config's batched self-play in this process (as a self-play actor
  builds it: `make_batched_selfplay` over `make_environments` with `make_run_searcher`), over
  --moves batched moves after the first (compiling) one, with the freshly initialised
  network; the network FLOPs of a move (1 initial + num_simulations recurrent inferences,
  counted as above) give the search's achieved GFLOP/s, and the same inferences timed alone
  (one call, XLA as the search) give the network's share of a move: the rest is the tree's
  bookkeeping (float64, op by op in a while loop), the environments and Python.
* loop: `muzero train` of each config as a subprocess for --seconds, once per --modes back
  end ("local": the interleaved loop; "ray": self-play actors beside the learner), stopped
  by SIGINT at the deadline (the run writes a final checkpoint and exits). The runs get
  `train.training_steps` 10^9 (none ends early) and a progress line every 5 s, before the
  --set overrides. The whole machine's CPU utilisation is sampled from /proc/stat every
  --sample-seconds (busy = user + nice + system + irq + softirq + steal over all, as % of
  100 x cores: the median after the first 30 s and the mean over the run), with the CPU of
  the run's own processes (the run and its descendants, from /proc/PID/stat) beside it,
  since the machine may be shared. Training steps/s, environment steps per hour and training
  steps per environment step come from the run's progress lines (`step N/... | games G |
  moves M |`, timed as they arrive) after the first 30 s, and over the whole run (the final
  `stopped by SIGINT at training step N` over the time to the signal); then the ratio of each
  mode to the first one.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, NamedTuple

import numpy as np
from benchlib import markdown_table, median_seconds, number, train_command, write_csv

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("flops", "steps", "selfplay", "loop")
CONFIGS = tuple(
    str(ROOT / "configs" / name)
    for name in ("cartpole.yaml", "tictactoe.yaml", "connect4.yaml", "minatar/breakout.yaml")
)
# A timed kernel call chains its op until it does about this many FLOPs, or MAX_CHAIN ops.
CALL_FLOPS = 2e8
MAX_CHAIN = 64
# Rates and CPU medians count from this many seconds into a training run (imports, compilation, first games).
STEADY_AFTER = 30.0
# What every loop run gets before --set: no run ends before the deadline; progress lines often enough to time.
LOOP_SETTINGS = ("train.training_steps=1000000000", "run.log_every_seconds=5")
# Seconds a run may take to write its final checkpoint and exit after SIGINT.
STOP_TIMEOUT = 300.0
PROGRESS = re.compile(r"step (\d+)/\d+ .*?\| games (\d+) \| moves (\d+) \|")
FINAL_STEP = re.compile(r"stopped by \w+ at training step (\d+)|done: (\d+) training steps")


def matmul_flops(m: int, k: int, n: int) -> int:
    """FLOPs of an [m, k] @ [k, n] product: a multiply and an add per term, 2mkn."""
    return 2 * m * k * n


def conv_flops(batch: int, height_out: int, width_out: int, channels_out: int, kernel: tuple[int, int, int]) -> int:
    """FLOPs of a 2-D convolution: 2 * B * H_out * W_out * C_out * (kh * kw * C_in), kernel = (kh, kw, C_in)."""
    kh, kw, channels_in = kernel
    return 2 * batch * height_out * width_out * channels_out * kh * kw * channels_in


class Kernel(NamedTuple):
    """An op the machine's rate is measured on: "matmul" x [m, k] @ w [k, n], or "conv" x [B, H, W, C_in]
    with w [kh, kw, C_in, C_out], stride 1, SAME (output B x H x W x C_out)."""

    name: str
    op: str
    input_shape: tuple[int, ...]
    weight_shape: tuple[int, ...]

    @property
    def flops(self) -> int:
        if self.op == "matmul":
            return matmul_flops(*self.input_shape, self.weight_shape[1])
        batch, height, width, _ = self.input_shape
        return conv_flops(batch, height, width, self.weight_shape[3], self.weight_shape[:3])


KERNELS = (
    Kernel("matmul 1024x1024 @ 1024x1024", "matmul", (1024, 1024), (1024, 1024)),
    Kernel("conv 3x3, 64x10x10x64 -> 64", "conv", (64, 10, 10, 64), (3, 3, 64, 64)),
    Kernel("conv 3x3, 64x10x10x16 -> 16 (MinAtar resnet, training batch)", "conv", (64, 10, 10, 16), (3, 3, 16, 16)),
    Kernel("conv 3x3, 16x10x10x16 -> 16 (MinAtar resnet, search batch)", "conv", (16, 10, 10, 16), (3, 3, 16, 16)),
)
REFERENCES = {"matmul": KERNELS[0].name, "conv": KERNELS[1].name}


# ---- the machine ---------------------------------------------------------------------------


def machine() -> dict:
    """The CPU model, its vector extensions, the cores and the load, from /proc/cpuinfo and os."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    fields = {key.strip(): value.strip() for key, value in fields.items()}
    flags = set(fields.get("flags", "").split())
    return {
        "cpu": fields.get("model name", platform.processor() or platform.machine()),
        "mhz": fields.get("cpu MHz", "?"),
        "simd": " ".join(f for f in ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_tile") if f in flags),
        "cores": os.cpu_count(),
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
    }


def kernel_worker(threads: int, repetitions: int) -> dict:
    """In a fresh process: TensorFlow's thread pools set (intra-op `threads`, inter-op 1, no
    GPU), then `measure_kernels`."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.set_visible_devices([], "GPU")  # the CPU's rate, on any machine
    measured = measure_kernels(KERNELS, repetitions)
    return {"threads": threads, **measured, "kernels": [{"threads": threads} | row for row in measured["kernels"]]}


def measure_kernels(kernels: Sequence[Kernel], repetitions: int) -> dict:
    """Each kernel's rate with and without XLA ({"kernels": rows}), and the cost of an empty
    call in microseconds ({"empty_call_us": {"graph": .., "xla": ..}})."""
    import tensorflow as tf

    rows = []
    for kernel in kernels:
        x = tf.random.stateless_normal(kernel.input_shape, seed=[0, 0])
        fan_in = float(np.prod(kernel.weight_shape[:-1]))  # keeps x's scale along the chain: no overflow, no denormals
        w = tf.random.stateless_normal(kernel.weight_shape, seed=[0, 1]) * fan_in**-0.5
        repeat = min(max(1, round(CALL_FLOPS / kernel.flops)), MAX_CHAIN)
        for xla in (False, True):
            seconds = seconds_per_call(tf.function(chained(kernel, repeat), jit_compile=xla), (x, w), repetitions)
            rows.append(
                {"kernel": kernel.name, "xla": xla, "ops_per_call": repeat, "ms_per_call": 1e3 * seconds}
                | {"gflops": kernel.flops * repeat / seconds / 1e9}
            )
    empty = {}
    for xla in (False, True):
        call = tf.function(add_one, jit_compile=xla)
        empty["xla" if xla else "graph"] = 1e6 * seconds_per_call(call, (tf.constant(1.0),), 200, warmup=5)
    return {"kernels": rows, "empty_call_us": empty}


def add_one(value):
    """The empty call's body."""
    return value + 1.0


def seconds_per_call(function: Callable, args: tuple, repetitions: int, warmup: int = 1) -> float:
    """Median seconds of `function(*args)`, its outputs fetched as numpy (so that the work is done)."""
    import tensorflow as tf

    return median_seconds(lambda: tf.nest.map_structure(lambda t: t.numpy(), function(*args)), repetitions, warmup)


def chained(kernel: Kernel, repeat: int) -> Callable:
    """x -> sum(op(...op(op(x, w), w)...)): `repeat` ops in one call; the sum keeps the result small."""
    import tensorflow as tf

    def run(x, w):
        for _ in range(repeat):
            x = tf.matmul(x, w) if kernel.op == "matmul" else tf.nn.conv2d(x, w, 1, "SAME")
        return tf.reduce_sum(x)

    return run


def kernel_rates(threads: int, repetitions: int) -> dict:
    """`kernel_worker` in a subprocess (this script with --kernel-threads), its JSON answer."""
    command = [sys.executable, __file__, "--kernel-threads", str(threads), "--repetitions", str(repetitions)]
    result = subprocess.run(command, capture_output=True, text=True, env=quiet_env(), check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.splitlines()[-1])


def flops_section(threads: Sequence[int], repetitions: int) -> dict:
    """Each kernel's GFLOP/s per thread count, with and without XLA; prints the table."""
    runs = [kernel_rates(n, repetitions) for n in threads]
    rows = [row for run in runs for row in run["kernels"]]
    rate = gflops_by_kernel(rows)
    columns = [(n, xla) for xla in (False, True) for n in threads]
    header = ["kernel", "GFLOP per op", *(f"{n} thread{'s' * (n > 1)}{', XLA' * xla}" for n, xla in columns)]
    table = [
        [k.name, number(k.flops / 1e9, ".4f"), *(number(rate[k.name, n, xla]) for n, xla in columns)] for k in KERNELS
    ]
    print(f"\nfloat32 GFLOP/s, median of {repetitions} calls (each chaining the op to ~{CALL_FLOPS / 1e9:g} GFLOP):")
    print(markdown_table(header, table))
    for run in runs:
        calls = run["empty_call_us"]
        print(
            f"an empty tf.function call, {run['threads']} thread(s): {calls['graph']:.0f} us; XLA {calls['xla']:.0f} us"
        )
    return {"kernels": rows, "empty_call_us": {run["threads"]: run["empty_call_us"] for run in runs}}


def reference_rates(flops: dict | None) -> dict[str, float]:
    """The all-core, non-XLA GFLOP/s of the reference matmul and convolution ({} without the flops section)."""
    if not flops:
        return {}
    most = max(row["threads"] for row in flops["kernels"])
    rate = gflops_by_kernel(flops["kernels"])
    return {op: rate[name, most, False] for op, name in REFERENCES.items()}


def gflops_by_kernel(rows: Sequence[dict]) -> dict[tuple[str, int, bool], float]:
    """GFLOP/s by (kernel, threads, XLA)."""
    return {(row["kernel"], row["threads"], row["xla"]): row["gflops"] for row in rows}


# ---- counting FLOPs on a graph --------------------------------------------------------------


def graph_flops(function: Callable, *specs) -> Counter:
    """FLOPs of `function` traced as a `tf.function` at `specs` (fixed shapes), per op type: the
    "flops" statistic TensorFlow registers for each op (the v1 profiler's float_operation).

    Raises:
      ValueError: an op with a registered count has a shape the trace left unknown.
    """
    import tensorflow as tf
    from tensorflow.python.framework import ops
    from tensorflow.python.profiler.internal import flops_registry  # noqa: F401 (registers the counts)
    from tensorflow.python.util import deprecation

    graph = tf.function(function).get_concrete_function(*specs).graph
    counts: Counter = Counter()
    with deprecation.silence():  # the counts read shapes through a v1 helper
        for op in live_operations(graph):
            value = ops.get_stats_for_node_def(graph, op.node_def, "flops").value
            if value:
                counts[op.type] += int(value)
    return counts


def live_operations(graph) -> list:
    """The ops of a function's graph that its outputs or its stateful ops depend on: what runs.
    (A gradient's unused half, such as the input gradient of the first layer, is pruned.)"""
    stack = [tensor.op for tensor in graph.outputs] + list(graph.control_outputs)
    live: set[str] = set()
    while stack:
        op = stack.pop()
        if op.name not in live:
            live.add(op.name)
            stack += [tensor.op for tensor in op.inputs] + list(op.control_inputs)
    return [op for op in graph.get_operations() if op.name in live]


def dense_share(counts: Counter) -> float:
    """The share of matmuls and convolutions (and their backprops) in the counted FLOPs."""
    dense = sum(value for op, value in counts.items() if "MatMul" in op or op.startswith("Conv"))
    return dense / max(sum(counts.values()), 1)


def fixed_specs(structure):
    """TensorSpecs of fixed shape for a structure of numpy arrays."""
    import tensorflow as tf

    return tf.nest.map_structure(lambda array: tf.TensorSpec(array.shape, tf.as_dtype(array.dtype)), structure)


# ---- one config's parts ---------------------------------------------------------------------


def label(config_path: str) -> str:
    """A config's path as the tables show it: relative to the repository when inside it."""
    path = Path(config_path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else config_path


def load(config_path: str, overrides: Sequence[str]):
    """(config, spec) of a config file with --set overrides."""
    from muzero.config_loader import load_config
    from muzero.envs import check_config_environment

    config = load_config(config_path, list(overrides))
    return config, check_config_environment(config)


def synthetic_batch(config, network, rng: np.random.Generator):
    """A `Batch` of the config's shapes as the replay buffer hands it over (scalar targets):
    random 0/1 observation planes, random actions, targets and policies."""
    from muzero.replay import Batch

    b, k, a = config.train.batch_size, config.train.num_unroll_steps, config.action_space_size
    spec = network.observation_spec
    image = tuple(spec.shape[1:].as_list())
    dtype = spec.dtype.as_numpy_dtype
    policy = rng.random((b, k + 1, a))
    batch = Batch(
        observation=rng.integers(0, 2, (b, *image)).astype(dtype),
        actions=rng.integers(a, size=(b, k)).astype(np.int32),
        target_value=rng.uniform(-1, 1, (b, k + 1)).astype(np.float32),
        target_reward=rng.uniform(-1, 1, (b, k + 1)).astype(np.float32),
        target_policy=(policy / policy.sum(-1, keepdims=True)).astype(np.float32),
        policy_mask=np.ones((b, k + 1), np.float32),
    )
    if config.train.consistency_loss_weight > 0:
        unrolled = rng.integers(0, 2, (b, k, *image)).astype(dtype)
        batch = batch._replace(unroll_observation=unrolled, unroll_mask=np.ones((b, k), np.float32))
    return batch


def with_jit(config, jit: bool):
    """The config with `train.jit_compile` = `jit` and no gradient-norm steps (one compiled step to time)."""
    return config.replace(
        train=dataclasses.replace(config.train, jit_compile=jit),
        run=dataclasses.replace(config.run, grad_summary_interval=0),
    )


def step_flops(learner, specs) -> tuple[Counter, Counter]:
    """FLOPs of the function `learner` compiles (`update_weights`: forward + backward), and of
    its forward pass alone (`muzero_loss`), traced at the fixed shapes of the batch `specs`."""
    from muzero.training import muzero_loss

    network, weight_decay = learner.network, learner.train.weight_decay

    def forward(batch):
        return muzero_loss(network, batch, weight_decay)[0]

    # The learner's tf.function has a batch dimension of None; its Python function, traced
    # again at fixed shapes, is the same graph with every shape known.
    return graph_flops(learner._step.python_function, specs), graph_flops(forward, specs)


def step_row(config_path: str, overrides: Sequence[str], steps: int, references: dict[str, float]) -> dict:
    """FLOPs and times of one config's training step (see the module docstring)."""
    import tensorflow as tf

    from muzero.factories import make_learner, make_run_network

    config, spec = load(config_path, overrides)
    network = make_run_network(config, spec)
    batch = synthetic_batch(config, network, np.random.default_rng(0))
    learners = {jit: make_learner(with_jit(config, jit), network) for jit in (True, False)}
    prepared = learners[True].prepare(batch)
    step, forward = step_flops(learners[True], fixed_specs(prepared))
    tensors = tf.nest.map_structure(tf.constant, prepared)
    compiled = {jit: 1e3 * seconds_per_call(learner._step, (tensors,), steps) for jit, learner in learners.items()}
    jit = config.train.jit_compile
    train_step = 1e3 * median_seconds(lambda: learners[jit].train_step(batch), steps)
    gflop = sum(step.values()) / 1e9
    achieved = gflop / (train_step / 1e3)
    return {
        "config": label(config_path),
        "parameters": sum(int(np.prod(v.shape)) for v in network.trainable_variables),
        "batch": config.train.batch_size,
        "unroll": config.train.num_unroll_steps,
        "jit_compile": jit,
        "gflop_per_step": gflop,
        "step_over_forward": sum(step.values()) / sum(forward.values()),
        "dense_share": dense_share(step),
        "train_step_ms": train_step,
        "compiled_step_ms_xla": compiled[True],
        "compiled_step_ms_no_xla": compiled[False],
        "gflops": achieved,
        **{f"fraction_of_{op}": achieved / rate for op, rate in references.items()},
        "flops_by_op": dict(step),
    }


def steps_section(configs: Sequence[str], overrides: Sequence[str], steps: int, references: dict) -> list[dict]:
    rows = [step_row(path, overrides, steps, references) for path in configs]
    print(f"\ntraining step (forward + backward, FLOPs counted on its graph), median of {steps} steps:")
    if references:
        rates = ", ".join(f"{op} {rate:.1f} GFLOP/s" for op, rate in references.items())
        print(f"fractions of: {rates} (the flops section's reference kernels, most threads, no XLA)")
    header = [
        "config",
        "params",
        "batch x (K+1)",
        "GFLOP/step",
        "step / forward",
        "matmul+conv share",
        "train_step ms",
        "compiled ms XLA",
        "compiled ms no XLA",
        "GFLOP/s",
        "of matmul rate",
        "of conv rate",
    ]
    table = [
        [
            r["config"],
            f"{r['parameters']:,}",
            f"{r['batch']} x {r['unroll'] + 1}",
            number(r["gflop_per_step"], ".4g"),
            number(r["step_over_forward"], ".2f"),
            number(r["dense_share"], ".0%"),
            f"{r['train_step_ms']:.1f} ({'XLA' if r['jit_compile'] else 'no XLA'})",
            number(r["compiled_step_ms_xla"]),
            number(r["compiled_step_ms_no_xla"]),
            number(r["gflops"], ".3g"),
            number(r.get("fraction_of_matmul"), ".1%"),
            number(r.get("fraction_of_conv"), ".1%"),
        ]
        for r in rows
    ]
    print(markdown_table(header, table))
    return rows


# ---- self-play --------------------------------------------------------------------------------


def inference_flops(network, rows: int) -> tuple[float, float]:
    """FLOPs per row of the network's initial and of its recurrent inference, at `rows` rows."""
    import tensorflow as tf

    spec = network.observation_spec
    observation = tf.TensorSpec([rows, *spec.shape[1:]], spec.dtype)
    hidden = network.initial_inference(tf.zeros(observation.shape, spec.dtype)).hidden_state

    def initial_inference(observation):
        return tuple(network.initial_inference(observation))

    def recurrent_inference(hidden_state, action):
        return tuple(network.recurrent_inference(hidden_state, action))

    initial = graph_flops(initial_inference, observation)
    action = tf.TensorSpec([rows], tf.int32)
    recurrent = graph_flops(recurrent_inference, tf.TensorSpec(hidden.shape, hidden.dtype), action)
    return sum(initial.values()) / rows, sum(recurrent.values()) / rows


def network_seconds(network, rows: int, simulations: int, jit: bool, repetitions: int) -> float:
    """Median seconds of a batched move's network arithmetic alone: an initial inference and
    `simulations` recurrent ones on `rows` rows, in one call (XLA when `jit`, as the search),
    every output used so that none is pruned."""
    import tensorflow as tf

    spec = network.observation_spec

    def move(observation, action):
        output = network.initial_inference(observation)
        hidden, total = output.hidden_state, tf.reduce_sum(output.value) + tf.reduce_sum(output.policy_logits)
        for _ in tf.range(simulations):
            output = network.recurrent_inference(hidden, action)
            hidden = output.hidden_state
            total += tf.reduce_sum(output.value) + tf.reduce_sum(output.reward) + tf.reduce_sum(output.policy_logits)
        return total

    inputs = (tf.zeros([rows, *spec.shape[1:]], spec.dtype), tf.zeros([rows], tf.int32))
    return seconds_per_call(tf.function(move, jit_compile=jit), inputs, repetitions)


def selfplay_row(config_path: str, overrides: Sequence[str], moves: int, repeats: int = 1) -> dict:
    """Moves/s of a config's batched self-play over `moves` batched moves after the first (the
    median of `repeats` such timings, one after the other), and the network arithmetic in them."""
    from muzero.envs import make_environments
    from muzero.factories import make_batched_selfplay, make_run_network, make_run_searcher

    config, spec = load(config_path, overrides)
    rows = config.selfplay.num_envs
    compiled = config.selfplay.search == "compiled"
    network = make_run_network(config, spec)
    searcher = make_run_searcher(config, spec, rows)
    selfplay = make_batched_selfplay(config, make_environments(config.game, rows, 0), searcher)
    published, rng = network.published_network(0), np.random.default_rng(0)
    started = time.perf_counter()
    selfplay.play(published, rng, 1)  # the first call traces and compiles the search
    first = time.perf_counter() - started
    timings = []  # (seconds, moves played) of each repeat
    for _ in range(repeats):
        started = time.perf_counter()
        _, played = selfplay.play(published, rng, moves)
        timings.append((time.perf_counter() - started, played))
    seconds, played = sorted(timings, key=lambda t: t[1] / t[0])[len(timings) // 2]  # the median's
    initial, recurrent = inference_flops(network, rows)
    simulations = config.search.num_simulations
    per_move = initial + simulations * recurrent
    alone = network_seconds(network, rows, simulations, compiled and config.selfplay.jit_compile, moves)
    return {
        "config": label(config_path),
        "games": rows,
        "simulations": simulations,
        "search": config.selfplay.search + (", XLA" if compiled and config.selfplay.jit_compile else ""),
        "first_call_s": first,
        "moves": played,
        "moves_per_s": played / seconds,
        "moves_per_s_each": " / ".join(f"{n / t:.0f}" for t, n in timings),
        "ms_per_batched_move": 1e3 * seconds / moves,
        "network_mflop_per_move": per_move / 1e6,
        "network_gflops": per_move * played / seconds / 1e9,
        "network_alone_ms": 1e3 * alone,
        "network_share": alone / (seconds / moves),
    }


def selfplay_section(configs: Sequence[str], overrides: Sequence[str], moves: int) -> list[dict]:
    rows = [selfplay_row(path, overrides, moves) for path in configs]
    print(f"\nself-play in this process, {moves} batched moves after the first (compiling) one:")
    header = [
        "config",
        "games x simulations",
        "search",
        "first call s",
        "ms per batched move",
        "moves/s",
        "network MFLOP per move",
        "network GFLOP/s",
        "network alone ms",
        "network share of the move",
    ]
    table = [
        [
            r["config"],
            f"{r['games']} x {r['simulations']}",
            r["search"],
            number(r["first_call_s"]),
            number(r["ms_per_batched_move"]),
            number(r["moves_per_s"], ",.0f"),
            number(r["network_mflop_per_move"], ".4g"),
            number(r["network_gflops"], ".3g"),
            number(r["network_alone_ms"]),
            number(r["network_share"], ".0%"),
        ]
        for r in rows
    ]
    print(markdown_table(header, table))
    return rows


# ---- the training loop ------------------------------------------------------------------------


class Progress(NamedTuple):
    """A progress line of a run: seconds since the run was started here, and its counters."""

    seconds: float
    step: int
    games: int
    moves: int


def cpu_jiffies(stat: str | None = None) -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine since boot, from /proc/stat's first line:
    busy = user + nice + system + irq + softirq + steal; total adds idle and iowait (guest
    time is already inside user and nice)."""
    stat = Path("/proc/stat").read_text() if stat is None else stat
    user, nice, system, idle, iowait, irq, softirq, steal = (int(v) for v in stat.split("\n", 1)[0].split()[1:9])
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def process_tree_seconds(root: int) -> float:
    """CPU seconds (user + system) of process `root` and its live descendants, from /proc/PID/stat."""
    parents, seconds = {}, {}
    for path in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = path.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, ...
        except (OSError, IndexError):
            continue  # ended meanwhile
        pid = int(path.parent.name)
        parents[pid] = int(fields[1])
        seconds[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    tree, frontier = {root}, [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier and pid not in tree]
        tree.update(children)
        frontier = children
    return sum(seconds.get(pid, 0.0) for pid in tree)


def read_lines(stream: IO[str], log: IO[str], started: float, lines: list[tuple[float, str]]) -> None:
    """Copies the run's output to its log, keeping each line with the seconds since `started` it arrived at."""
    for line in stream:
        log.write(line)
        lines.append((time.monotonic() - started, line))


def progress_points(lines: Sequence[tuple[float, str]]) -> list[Progress]:
    """The progress lines among (seconds, line) pairs."""
    points = []
    for seconds, line in lines:
        if match := PROGRESS.search(line):
            points.append(Progress(seconds, *(int(v) for v in match.groups())))
    return points


def final_step(lines: Sequence[tuple[float, str]]) -> int | None:
    """The training step of the run's last line (`stopped by SIGINT at training step N`, or `done: N training steps`)."""
    for _, line in reversed(lines):
        if match := FINAL_STEP.search(line):
            return int(match.group(1) or match.group(2))
    return None


def utilisation(samples: Sequence[dict], cores: int) -> dict:
    """CPU % (of 100 x `cores`) of the machine and of the run's processes between samples
    ({"seconds", "busy", "total", "run_seconds"}): median of the intervals after STEADY_AFTER, mean overall."""
    out: dict[str, float | None] = {}
    for key, measure in (
        ("cpu", lambda a, b: 100 * cores * (b["busy"] - a["busy"]) / max(b["total"] - a["total"], 1)),
        ("run_cpu", lambda a, b: 100 * (b["run_seconds"] - a["run_seconds"]) / (b["seconds"] - a["seconds"])),
    ):
        steady = [measure(a, b) for a, b in itertools.pairwise(samples) if a["seconds"] >= STEADY_AFTER]
        out[f"{key}_median_steady"] = statistics.median(steady) if steady else None
        out[f"{key}_mean"] = measure(samples[0], samples[-1]) if len(samples) > 1 else None
    return out


def rates(first: Progress, last: Progress) -> dict[str, float | None]:
    """Training steps/s, environment steps per hour and training steps per environment step between two points."""
    seconds, moves = last.seconds - first.seconds, last.moves - first.moves
    return {
        "steps_per_s": (last.step - first.step) / seconds if seconds > 0 else None,
        "env_steps_per_hour": 3600 * moves / seconds if seconds > 0 else None,
        "steps_per_env_step": (last.step - first.step) / moves if moves > 0 else None,
    }


def summarize_run(lines: Sequence[tuple[float, str]], samples: Sequence[dict], stopped_at: float, cores: int) -> dict:
    """A run's figures from its timed output lines and CPU samples; `stopped_at`: seconds to the SIGINT."""
    points = [p for p in progress_points(lines) if p.seconds <= stopped_at]
    step = final_step(lines)
    step = step if step is not None else (points[-1].step if points else 0)
    steady = [p for p in points if p.seconds >= STEADY_AFTER]
    summary: dict[str, Any] = {"final_step": step, "seconds": stopped_at, "whole_steps_per_s": step / stopped_at}
    if points:  # from the start to the last progress line before the signal
        whole = rates(Progress(0.0, 0, 0, 0), points[-1])
        summary |= {f"whole_{key}": whole[key] for key in ("env_steps_per_hour", "steps_per_env_step")}
    if len(steady) >= 2:
        summary |= {f"steady_{key}": value for key, value in rates(steady[0], steady[-1]).items()}
    return summary | utilisation(samples, cores)


def sample_until(process: subprocess.Popen, started: float, deadline: float, every: float) -> list[dict]:
    """CPU samples of the machine and of the run's processes every `every` seconds, until the
    deadline (seconds after `started`) or the run's end."""
    samples = []
    while True:
        busy, total = cpu_jiffies()
        seconds = time.monotonic() - started
        samples.append(
            {"seconds": seconds, "busy": busy, "total": total, "run_seconds": process_tree_seconds(process.pid)}
        )
        if seconds >= deadline or process.poll() is not None:
            return samples
        time.sleep(min(every, max(deadline - seconds, 0.0)))


def run_training(config_path: str, mode: str, args: argparse.Namespace) -> dict:
    """One `muzero train` run of --seconds with `--backend mode`, stopped by SIGINT; its figures."""
    name = f"{Path(config_path).stem}-{mode}"
    run_dir = args.out / "loop" / name
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    command = train_command(config_path, run_dir, 0, [*LOOP_SETTINGS, *args.set], backend=mode)
    print(f"{name}: {' '.join(command[1:])} for {args.seconds:g} s", flush=True)
    lines: list[tuple[float, str]] = []
    with open(run_dir.parent / f"{name}.log", "w") as log:
        started = time.monotonic()
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=quiet_env()
        )
        reader = threading.Thread(target=read_lines, args=(process.stdout, log, started, lines), daemon=True)
        reader.start()
        samples = sample_until(process, started, args.seconds, args.sample_seconds)
        stopped_at = time.monotonic() - started
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join()
    summary = summarize_run(lines, samples, stopped_at, os.cpu_count() or 1)
    if process.returncode != 0:
        print("".join(line for _, line in lines[-20:]), end="")
    return (
        {"config": label(config_path), "mode": mode, "exit_code": process.returncode} | summary | {"samples": samples}
    )


def loop_section(args: argparse.Namespace) -> list[dict]:
    rows = [run_training(path, mode, args) for path in args.configs for mode in args.modes]
    cores = os.cpu_count() or 1
    print(f"\ntraining loop, {args.seconds:g} s per run ('steady': after the first {STEADY_AFTER:g} s):")
    header = [
        "config",
        "mode",
        "final step",
        "steps/s steady",
        "steps/s whole",
        "env steps/h steady",
        "env steps/h whole",
        "steps per env step",
        f"machine CPU % of {100 * cores} (median steady / mean)",
        "run's processes CPU %",
    ]
    table = [
        [
            r["config"],
            r["mode"],
            f"{r['final_step']:,}",
            number(r.get("steady_steps_per_s")),
            number(r["whole_steps_per_s"]),
            number(r.get("steady_env_steps_per_hour"), ",.0f"),
            number(r.get("whole_env_steps_per_hour"), ",.0f"),
            number(r.get("steady_steps_per_env_step"), ".3f"),
            f"{number(r['cpu_median_steady'], '.0f')} / {number(r['cpu_mean'], '.0f')}",
            f"{number(r['run_cpu_median_steady'], '.0f')} / {number(r['run_cpu_mean'], '.0f')}",
        ]
        for r in rows
    ]
    print(markdown_table(header, table))
    if len(args.modes) > 1:
        print_ratios(rows, args.modes)
    return rows


def print_ratios(rows: Sequence[dict], modes: Sequence[str]) -> None:
    """Each mode's steady steps/s and environment steps per hour over the first mode's, per config."""
    by = {(r["config"], r["mode"]): r for r in rows}
    header = ["config", *(f"{m}/{modes[0]} {what}" for m in modes[1:] for what in ("steps/s", "env steps/h"))]
    table = []
    for config in dict.fromkeys(r["config"] for r in rows):
        base = by[config, modes[0]]
        cells = [
            number(ratio(by[config, m].get(f"steady_{key}"), base.get(f"steady_{key}")), ".2f")
            for m in modes[1:]
            for key in ("steps_per_s", "env_steps_per_hour")
        ]
        table.append([config, *cells])
    print(markdown_table(header, table))


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


# ---- the command --------------------------------------------------------------------------------


def quiet_env() -> dict[str, str]:
    """This environment, with TensorFlow's C++ INFO lines and Ray's usage report off."""
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", RAY_USAGE_STATS_ENABLED="0")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated, of: " + ", ".join(SECTIONS))
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS))
    parser.add_argument("--modes", nargs="+", default=["local", "ray"], help="muzero train --backend values to compare")
    parser.add_argument("--seconds", type=float, default=600.0, help="wall time of each training run")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="config override, every section"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/bench_throughput"))
    parser.add_argument("--threads", type=int, nargs="+", default=sorted({1, os.cpu_count() or 1}))
    parser.add_argument("--repetitions", type=int, default=10, help="timed calls per kernel")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps per config")
    parser.add_argument("--moves", type=int, default=20, help="timed batched self-play moves per config")
    parser.add_argument("--sample-seconds", type=float, default=2.0, help="CPU sampling interval of the loop runs")
    parser.add_argument("--kernel-threads", type=int, default=None, help=argparse.SUPPRESS)  # the flops worker
    args = parser.parse_args(argv)
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    if unknown := set(args.sections) - set(SECTIONS):
        parser.error(f"--sections: unknown {', '.join(sorted(unknown))}; choose from {', '.join(SECTIONS)}")
    return args


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.kernel_threads is not None:
        print(json.dumps(kernel_worker(args.kernel_threads, args.repetitions)))
        return {}
    if {"steps", "selfplay"} & set(args.sections):
        from muzero.tf_runtime import load_tensorflow, quiet_tensorflow_cpp

        quiet_tensorflow_cpp()
        load_tensorflow()  # without the CUDA probe's lines on a machine with no GPU
    results: dict[str, Any] = {"machine": machine(), "arguments": {k: str(v) for k, v in vars(args).items()}}
    m = results["machine"]
    load = " ".join(f"{value:.2f}" for value in m["load_average"])
    print(f"machine: {m['cpu']} ({m['simd']}) at {m['mhz']} MHz, {m['cores']} cores; load average {load}")
    args.out.mkdir(parents=True, exist_ok=True)
    sections: dict[str, Callable[[], Any]] = {
        "flops": lambda: flops_section(args.threads, args.repetitions),
        "steps": lambda: steps_section(args.configs, args.set, args.steps, reference_rates(results.get("flops"))),
        "selfplay": lambda: selfplay_section(args.configs, args.set, args.moves),
        "loop": lambda: loop_section(args),
    }
    for name in SECTIONS:
        if name in args.sections:
            results[name] = sections[name]()
            rows = results[name]["kernels"] if name == "flops" else results[name]
            write_csv(args.out / f"{name}.csv", [flat_row(row) for row in rows])
            (args.out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    print(f"\nwrote {args.out}/results.json and a CSV per section")
    return results


def flat_row(row: dict) -> dict:
    """A row without its nested parts (samples, FLOPs by op), for CSV."""
    return {key: value for key, value in row.items() if not isinstance(value, (dict, list))}


if __name__ == "__main__":
    main()
