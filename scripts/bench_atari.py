"""Atari learner and self-play throughput, with the machine's own matmul rate as the reference.

    python scripts/bench_atari.py [--size tiny|paper] [--batch 32] [--steps 5] [--envs 2] [--moves 4]

Rows, all measured in this run on this machine:

* matmul reference: a large float32 (or bfloat16 with --mixed-precision) matrix
  product, the rate this machine reaches on dense arithmetic (TFLOP/s).
* training step: `update_weights` (K = 5 unrolled steps, the run's `tf.function`,
  XLA with --jit) on random batches of the paper's input ([B, 96, 96, 128] uint8);
  steps/s, samples/s, and the rate it reaches, FLOPs counted from the layer shapes
  (x3 for forward + backward), as a fraction of the matmul reference.
* self-play: the run's self-play source (`muzero.builder.make_selfplay_source`, batched) on real ALE Pong environments with the compiled
  search (50 simulations at paper size); moves/s and frames/s (x4 action repeat).

Each time is the median over rounds after one warm-up round (tracing, compiling).
On a GPU, `--size paper --batch 1024 --mixed-precision --jit` is the issue's target.
"""

from __future__ import annotations

import argparse

import numpy as np
import tensorflow as tf
from benchlib import median_seconds

from muzero.builder import make_selfplay_source
from muzero.config import (
    GameConfig,
    MuZeroConfig,
    NetworkConfig,
    SearchConfig,
    SelfPlayConfig,
    TrainConfig,
)
from muzero.envs import check_environment
from muzero.envs.atari import AtariSettings
from muzero.factories import make_learner, make_run_network
from muzero.replay import Batch
from muzero.storage import SharedStorage

SIZES = {
    "tiny": {"planes": 8, "blocks": 1, "hidden_layers": (16,)},
    "paper": {"planes": 256, "blocks": 16, "hidden_layers": (256,)},
}


def make_config(args: argparse.Namespace) -> MuZeroConfig:
    return MuZeroConfig(
        game=GameConfig(
            id="ALE/Pong-v5", action_space_size=18, max_moves=27_000, stacked_frames=32, kwargs=AtariSettings()
        ),
        search=SearchConfig(num_simulations=args.simulations),
        selfplay=SelfPlayConfig(batched=True, num_envs=args.envs, search="compiled", jit_compile=args.jit),
        network=NetworkConfig(kind="resnet", support_size=300, **SIZES[args.size]),
        train=TrainConfig(
            batch_size=args.batch, num_unroll_steps=5, jit_compile=args.jit, mixed_precision=args.mixed_precision
        ),
    )


def forward_flops(model: tf.keras.Model) -> float:
    """Multiply-adds x 2 of the convolutions and dense layers of one sample's forward pass."""
    flops = 0.0
    for layer in model.layers:
        if isinstance(layer, tf.keras.layers.Conv2D):
            _, height, width, out_planes = layer.output.shape
            kernel = layer.kernel.shape
            flops += 2.0 * height * width * out_planes * kernel[0] * kernel[1] * kernel[2]
        elif isinstance(layer, tf.keras.layers.Dense):
            flops += 2.0 * np.prod(layer.kernel.shape)
    return flops


def matmul_rate(dtype: tf.DType, size: int = 2048) -> float:
    a = tf.random.normal([size, size], dtype=tf.float32)
    a = tf.cast(a, dtype)
    product = tf.function(lambda x: tf.matmul(x, x))
    seconds = median_seconds(lambda: product(a).numpy(), 5)
    return 2.0 * size**3 / seconds


def random_batch(config: MuZeroConfig, rng: np.random.Generator) -> Batch:
    b, k, a = config.train.batch_size, config.train.num_unroll_steps, config.action_space_size
    policy = rng.random((b, k + 1, a))
    return Batch(
        observation=rng.integers(256, size=(b, 96, 96, 128), dtype=np.uint8),
        actions=rng.integers(a, size=(b, k)).astype(np.int32),
        target_value=rng.normal(size=(b, k + 1)).astype(np.float32),
        target_reward=rng.normal(size=(b, k + 1)).astype(np.float32),
        target_policy=(policy / policy.sum(-1, keepdims=True)).astype(np.float32),
        policy_mask=np.ones((b, k + 1), np.float32),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=5, help="timed training steps")
    parser.add_argument("--envs", type=int, default=2, help="self-play environments (batched search rows)")
    parser.add_argument("--moves", type=int, default=4, help="timed self-play moves")
    parser.add_argument("--simulations", type=int, default=50)
    parser.add_argument("--jit", action="store_true", help="XLA for the training step and the search")
    parser.add_argument("--mixed-precision", action="store_true", help="bfloat16 compute")
    args = parser.parse_args()
    config = make_config(args)
    devices = [d.device_type for d in tf.config.list_logical_devices()]
    print(
        f"devices: {devices}; size {args.size}, batch {args.batch}, K 5, jit {args.jit}, "
        f"mixed precision {args.mixed_precision}"
    )

    reference = matmul_rate(tf.bfloat16 if args.mixed_precision else tf.float32)
    print(f"matmul reference: {reference / 1e12:.3f} TFLOP/s")

    spec = check_environment(config.game, network=config.network)
    network = make_run_network(config, spec)
    learner = make_learner(config, network)
    params = sum(int(np.prod(v.shape)) for v in network.trainable_variables)
    representation = forward_flops(network.representation)
    recurrent = forward_flops(network.dynamics) + forward_flops(network.prediction)
    per_sample = 3 * (representation + forward_flops(network.prediction) + 5 * recurrent)
    print(
        f"network: {params / 1e6:.2f} M parameters; forward GFLOP per sample: representation "
        f"{representation / 1e9:.3f}, dynamics + prediction {recurrent / 1e9:.4f}; training step "
        f"{per_sample / 1e9:.2f} GFLOP per sample (3 x forward, K = 5)"
    )

    batch = random_batch(config, np.random.default_rng(0))
    step = median_seconds(lambda: learner.train_step(batch), args.steps)
    rate = per_sample * args.batch / step
    print(
        f"training step: {step:.3f} s median -> {1 / step:.2f} steps/s, {args.batch / step:.1f} samples/s, "
        f"{rate / 1e12:.3f} TFLOP/s = {rate / reference:.2f} x the matmul reference"
    )

    # The run's own self-play source (`muzero train` builds the same): args.envs games in lockstep.
    selfplay = make_selfplay_source(config, spec, backend="local", ray_address=None, seed=0).batched
    storage = SharedStorage(config.action_space_size)
    storage.save_network(0, network)
    rng = np.random.default_rng(0)
    move = median_seconds(lambda: selfplay.step(storage.latest_network(), rng), args.moves)
    moves = args.envs / move
    print(
        f"self-play: {move:.3f} s per batched move of {args.envs} games, {args.simulations} simulations -> "
        f"{moves:.1f} moves/s, {moves * config.game.kwargs.frame_skip:.1f} frames/s"
    )


if __name__ == "__main__":
    main()
