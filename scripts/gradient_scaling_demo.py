"""How large is the gradient that reaches the representation network, as K grows?

For K = 1..10 unroll steps and for the hidden-state link after each dynamics step
being scale_gradient(., s) with s in {1.0, 0.5, 0.0}, or a norm clip of the gradient
in its place, computes the norm of d loss / d (representation weights) of
`muzero_loss` (which keeps the pseudocode's 1/K on each recurrent step's loss) on
random batches, over several seeds; writes a CSV and a PNG.

    python scripts/gradient_scaling_demo.py --out docs/gradient_scaling_demo

Runs on the CPU in well under 2 minutes; the PNG needs the `plot` extra (matplotlib).
"""

from __future__ import annotations

import argparse
import csv
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

from muzero.config import GameConfig, MuZeroConfig, NetworkConfig, TrainConfig
from muzero.models import MLPNetwork
from muzero.replay import Batch
from muzero.support import scalar_to_support
from muzero.training import muzero_loss


def clip_gradient_norm(clip_norm: float):
    """The popular wrong reading: clip the gradient's norm on the hidden-state link."""

    @tf.custom_gradient
    def _clip(x):
        return tf.identity(x), lambda upstream: tf.clip_by_norm(upstream, clip_norm)

    return _clip


def random_batch(rng: np.random.Generator, batch_size: int, k: int, support_size: int, actions: int) -> Batch:
    policy = rng.random((batch_size, k + 1, actions)).astype(np.float32)
    return Batch(
        observation=rng.normal(size=(batch_size, 4)).astype(np.float32),
        actions=rng.integers(actions, size=(batch_size, k)).astype(np.int32),
        target_value=scalar_to_support(rng.uniform(0, 50, (batch_size, k + 1)), support_size),
        target_reward=scalar_to_support(rng.uniform(0, 1, (batch_size, k + 1)), support_size),
        target_policy=policy / policy.sum(-1, keepdims=True),
        policy_mask=np.ones((batch_size, k + 1), np.float32),
    )


def representation_gradient_norm(network: MLPNetwork, batch: Batch, variant: str, clip_norm: float) -> float:
    kwargs = {}
    if variant.startswith("scale"):
        kwargs["hidden_state_scale"] = float(variant.split("=")[1])
    else:
        kwargs["hidden_state_gradient"] = clip_gradient_norm(clip_norm)
    variables = network.representation.trainable_variables
    with tf.GradientTape() as tape:
        total, _, _ = muzero_loss(network, batch, weight_decay=0.0, **kwargs)
    return float(tf.linalg.global_norm(tape.gradient(total, variables)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/gradient_scaling_demo"),
                        help="output prefix: writes PREFIX.csv and PREFIX.png")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--max-k", type=int, default=10)
    parser.add_argument("--clip-norm", type=float, default=0.01,
                        help="norm the clipping variant clips the hidden-state gradient to")
    args = parser.parse_args()

    variants = ["scale=1.0", "scale=0.5", "scale=0.0", f"clip_norm={args.clip_norm:g}"]
    support_size, actions = 10, 2
    config = MuZeroConfig(game=GameConfig(action_space_size=actions),
                          network=NetworkConfig(hidden_state_size=16, hidden_layers=(32,), support_size=support_size),
                          train=TrainConfig(weight_decay=0.0))
    rows = []
    for k in range(1, args.max_k + 1):
        norms = {variant: [] for variant in variants}
        for seed in range(args.seeds):
            tf.keras.utils.set_random_seed(seed)
            network = MLPNetwork(config, observation_size=4)
            batch = random_batch(np.random.default_rng(seed), 64, k, support_size, actions)
            for variant in variants:
                norms[variant].append(representation_gradient_norm(network, batch, variant, args.clip_norm))
        for variant, values in norms.items():
            rows.append({"K": k, "variant": variant, "median": float(np.median(values)),
                         "min": float(np.min(values)), "max": float(np.max(values))})
        print(f"K={k:2d} " + "  ".join(f"{v}: {np.median(n):.4f}" for v, n in norms.items()), flush=True)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out.with_suffix(".csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["K", "variant", "median", "min", "max"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {args.out.with_suffix('.csv')}")
    try:
        import matplotlib
    except ImportError:
        print("matplotlib not installed (pip install -e '.[plot]'): no PNG")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(7, 4.2))
    for variant in variants:
        data = [r for r in rows if r["variant"] == variant]
        ks = [r["K"] for r in data]
        axis.plot(ks, [r["median"] for r in data], marker="o", label=variant)
        axis.fill_between(ks, [r["min"] for r in data], [r["max"] for r in data], alpha=0.15)
    axis.set_xlabel("K (num_unroll_steps)")
    axis.set_ylabel("|d loss / d representation weights|")
    axis.set_title(f"Gradient reaching the representation network (median of {args.seeds} seeds)")
    axis.grid(alpha=0.3)
    axis.legend(title="hidden-state link")
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=110)
    print(f"wrote {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
