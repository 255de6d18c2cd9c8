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
from pathlib import Path

import numpy as np
import tensorflow as tf

from muzero.checkpoints import Checkpointer
from muzero.config import GameConfig, MuZeroConfig, NetworkConfig, TrainConfig
from muzero.config_loader import load_config
from muzero.networks.mlp import MLPNetwork
from muzero.replay import Batch
from muzero.run_dir import CHECKPOINT_DIR, CONFIG_FILE
from muzero.support import scalar_to_support
from muzero.training import muzero_loss

PARTS = ("whole loss", "recurrent steps only")


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


def representation_gradient_norms(
    network: MLPNetwork, batch: Batch, variant: str, clip_norm: float
) -> tuple[float, float]:
    """(norm of the whole loss's gradient, norm of the recurrent steps' part) at the representation."""
    kwargs = {}
    if variant.startswith("scale"):
        kwargs["hidden_state_scale"] = float(variant.split("=")[1])
    else:
        kwargs["hidden_state_gradient"] = clip_gradient_norm(clip_norm)
    variables = network.representation.trainable_variables
    with tf.GradientTape(persistent=True) as tape:
        total, metrics, _ = muzero_loss(network, batch, weight_decay=0.0, **kwargs)
        # The initial step's loss has weight 1 and no scaled link: removing its forward
        # value removes exactly its gradient, leaving the K recurrent steps' part.
        recurrent = total - metrics["step_0"]
    whole = float(tf.linalg.global_norm(tape.gradient(total, variables)))
    return whole, float(tf.linalg.global_norm(tape.gradient(recurrent, variables)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("docs/gradient_scaling_demo"),
        help="output prefix: writes PREFIX.csv and PREFIX.png",
    )
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--max-k", type=int, default=10)
    parser.add_argument(
        "--clip-norm", type=float, default=0.01, help="norm the clipping variant clips the hidden-state gradient to"
    )
    parser.add_argument(
        "--run",
        type=Path,
        default=None,
        help="use this run's trained network (newest checkpoint) instead of random ones",
    )
    args = parser.parse_args()

    variants = ["scale=1.0", "scale=0.5", "scale=0.0", f"clip_norm={args.clip_norm:g}"]
    if args.run is not None:
        config = load_config(args.run / CONFIG_FILE)
        trained = MLPNetwork(config.network, config.action_space_size, observation_size=4)
        Checkpointer(args.run / CHECKPOINT_DIR, trained, optimizer=None).restore()
    else:
        config = MuZeroConfig(
            game=GameConfig(action_space_size=2),
            network=NetworkConfig(hidden_state_size=16, hidden_layers=(32,), support_size=10),
            train=TrainConfig(weight_decay=0.0),
        )
    support_size, actions = config.network.support_size, config.action_space_size
    rows = []
    for k in range(1, args.max_k + 1):
        norms = {(variant, part): [] for variant in variants for part in PARTS}
        for seed in range(args.seeds):
            tf.keras.utils.set_random_seed(seed)
            network = (
                trained
                if args.run is not None
                else MLPNetwork(config.network, config.action_space_size, observation_size=4)
            )
            batch = random_batch(np.random.default_rng(seed), 64, k, support_size, actions)
            for variant in variants:
                whole, recurrent = representation_gradient_norms(network, batch, variant, args.clip_norm)
                norms[(variant, "whole loss")].append(whole)
                norms[(variant, "recurrent steps only")].append(recurrent)
        for (variant, part), values in norms.items():
            rows.append(
                {
                    "K": k,
                    "variant": variant,
                    "part": part,
                    "median": float(np.median(values)),
                    "min": float(np.min(values)),
                    "max": float(np.max(values)),
                }
            )
        for part in PARTS:
            print(
                f"K={k:2d} {part:>20}: " + "  ".join(f"{v}: {np.median(norms[(v, part)]):.4f}" for v in variants),
                flush=True,
            )

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out.with_suffix(".csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["K", "variant", "part", "median", "min", "max"])
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

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    for axis, part in zip(axes, PARTS):
        for variant in variants:
            data = [r for r in rows if r["variant"] == variant and r["part"] == part]
            ks = [r["K"] for r in data]
            axis.plot(ks, [r["median"] for r in data], marker="o", label=variant)
            axis.fill_between(ks, [r["min"] for r in data], [r["max"] for r in data], alpha=0.12)
        axis.set_xlabel("K (num_unroll_steps)")
        axis.set_ylabel("gradient norm at the representation weights")
        axis.set_title(f"{part}")
        axis.grid(alpha=0.3)
        axis.legend(title="hidden-state link", fontsize=8)
    network_kind = f"trained network of run {args.run.name}" if args.run else "random networks"
    fig.suptitle(
        f"Gradient of muzero_loss reaching the representation network ({network_kind}; median of "
        f"{args.seeds} seeds, band: min-max)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=110)
    print(f"wrote {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
