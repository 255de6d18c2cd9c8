"""Where a run's losses sit above their floors, unroll step by unroll step, on its own replay.

    python scripts/probe_value.py --run runs/c4_2h/connect4_seed0 --batches 20

Reads the run's newest complete checkpoint: the network and the replay buffer saved with it.
It samples batches as training does (the run's K, td_steps, priorities and symmetries), and
runs the network along each unroll (representation at k = 0, then the dynamics) in inference
mode, as the search sees it: a resnet's batch norm uses its moving averages, where training's
loss uses the batch's statistics, so the figures differ a little from TensorBoard's. Means over
the batch as training takes them (positions past a game's end included: their value targets
and returns are 0, so the floor and the returns' squares fall with k). For each step k:

* the value loss against the training targets and its floor, the targets' own entropy
  (`loss/value_target_entropy` in TensorBoard, but per step): what the value head does not
  fit, plus the targets' noise;
* the value loss against the return to the end of the game (the same positions, targets
  made with td_steps as long as the longest stored game and no off-policy correction: the
  outcome in a board game; a game cut at `game.max_moves` ends there, or with its bootstrap
  value under `game.bootstrap_truncated`);
* the squared error of the predicted value (a scalar) against both targets, and of the
  training target against the return to the end: how far the bootstrapped targets are
  from what happened; and the mean square of the return to the end, the error of a head that
  always says 0 (the yardstick for the two before);
* the policy loss and its floor.

With Reanalyse on, the training targets bootstrap from the checkpoint's target network θ⁻,
as training's do.

A gap that grows with k comes from the dynamics; one already there at k = 0 from the
representation and the value head, or from the targets. docs/boardgames.md quotes it.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = (
    "value loss",
    "value floor",
    "value loss vs end",
    "value sq. error",
    "value sq. error vs end",
    "target sq. error vs end",
    "end squared",
    "policy loss",
    "policy floor",
)


def cross_entropy(logits: np.ndarray, target: np.ndarray) -> np.ndarray:
    """-sum target * log softmax(logits) over the last axis, [..., n] -> [...]: the op
    `muzero_loss` takes its policy loss with (and its categorical value loss is)."""
    import tensorflow as tf

    return tf.nn.softmax_cross_entropy_with_logits(labels=target, logits=logits).numpy()


def entropy(distribution: np.ndarray) -> np.ndarray:
    """The floor under a cross-entropy, [..., n] -> [...], as training logs it (`support.entropy_tf`)."""
    from muzero.support import entropy_tf

    return entropy_tf(distribution).numpy()


def step_rows(
    value_logits: np.ndarray,
    value: np.ndarray,
    policy_logits: np.ndarray,
    target: dict,
    end: dict,
    policy_mask: np.ndarray,
) -> np.ndarray:
    """The table's columns for each unroll step, as means over the batch.

    Args:
      value_logits: [B, K+1, n] predicted value logits (categorical heads).
      value: [B, K+1] the predicted values as scalars.
      policy_logits: [B, K+1, A].
      target: the training batch's "support" [B, K+1, n] (two-hot value targets), "scalar"
        [B, K+1] (the same targets as scalars) and "policy" [B, K+1, A].
      end: "support" and "scalar" of the same positions with the return to the end.
      policy_mask: [B, K+1], 0 past the end of a game (no policy target there; the mean is
        still over all B, as `muzero_loss` takes it).

    Returns:
      [K+1, len(COLUMNS)].
    """
    columns = [
        cross_entropy(value_logits, target["support"]).mean(axis=0),
        entropy(target["support"]).mean(axis=0),
        cross_entropy(value_logits, end["support"]).mean(axis=0),
        np.square(value - target["scalar"]).mean(axis=0),
        np.square(value - end["scalar"]).mean(axis=0),
        np.square(target["scalar"] - end["scalar"]).mean(axis=0),
        np.square(end["scalar"]).mean(axis=0),
        (cross_entropy(policy_logits, target["policy"]) * policy_mask).mean(axis=0),
        (entropy(target["policy"]) * policy_mask).mean(axis=0),
    ]
    return np.stack(columns, axis=1)


def unroll(network, batch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(value logits [B, K+1, n], values [B, K+1], policy logits [B, K+1, A]) along the batch's unrolls."""
    output = network.initial_inference(batch.observation, training=False)
    outputs = [output]
    for k in range(batch.actions.shape[1]):
        output = network.recurrent_inference(output.hidden_state, batch.actions[:, k], training=False)
        outputs.append(output)
    value_logits, value, policy_logits = (
        np.stack([np.asarray(getattr(o, name)) for o in outputs], axis=1)
        for name in ("value_logits", "value", "policy_logits")
    )
    return value_logits, value, policy_logits


def probe(run_dir: Path, batches: int, seed: int, uniform: bool = False) -> tuple[int, np.ndarray]:
    """(training step of the checkpoint, the table [K+1, len(COLUMNS)] averaged over `batches`);
    `uniform`: without priorities (`replay.priority_alpha` 0) even where the run drew by them."""
    from muzero.builder import make_target_network
    from muzero.checkpoints import Checkpointer
    from muzero.config_loader import load_config
    from muzero.envs import check_environment
    from muzero.factories import make_learner, make_replay_buffer, make_run_network
    from muzero.reanalyse import reanalyse_enabled
    from muzero.run_dir import CHECKPOINT_DIR, CONFIG_FILE

    config = load_config(run_dir / CONFIG_FILE)
    if uniform:
        config = replace(config, replay=replace(config.replay, priority_alpha=0.0))
    if config.network.support_size == 0:
        raise SystemExit(f"{run_dir}: scalar value heads; this probe reads categorical ones")
    if config.selfplay.segment_length:  # a stored segment stops short of its game's end
        raise SystemExit(f"{run_dir}: selfplay.segment_length is set; this probe reads whole games")
    spec = check_environment(config.game)
    network = make_run_network(config, spec)
    step, state = Checkpointer(run_dir / CHECKPOINT_DIR, network, optimizer=None).restore()
    learner = make_learner(config, network)  # its `prepare`: the targets as the training step sees them
    k, td = config.train.num_unroll_steps, learner.td_steps
    replay = make_replay_buffer(config, spec, np.random.default_rng(seed))
    replay.load_state_dict(state["replay"])
    if reanalyse_enabled(config.reanalyse):  # value targets from θ⁻, as the run's (muzero.builder)
        target_network = make_target_network(config, spec)
        target_network.restore(state.get("reanalyse", {}).get("target_network"), step, network)
        replay.bootstrap_value_fn = target_network.values
    del state
    correction = replay.off_policy_correction_steps
    to_the_end = max(len(game.history) for game in replay.games)  # from any position, past its game's end
    tables = []
    for b in range(batches):
        # The same positions drawn twice (the same random state), the second time with targets to the end.
        drawn = []
        for td_steps, shorten in ((td, correction), (to_the_end, 0)):
            replay.rng = np.random.default_rng([seed, b])
            replay.off_policy_correction_steps = shorten  # no horizon cut for the return to the end
            drawn.append(replay.sample_batch(k, td_steps))
        batch, end_batch = drawn
        np.testing.assert_array_equal(batch.actions, end_batch.actions)  # the same positions
        np.testing.assert_array_equal(batch.observation, end_batch.observation)
        prepared, end_prepared = learner.prepare(batch), learner.prepare(end_batch)
        value_logits, value, policy_logits = unroll(network, prepared)
        target = {"support": prepared.target_value, "scalar": batch.target_value, "policy": batch.target_policy}
        end = {"support": end_prepared.target_value, "scalar": end_batch.target_value}
        tables.append(step_rows(value_logits, value, policy_logits, target, end, batch.policy_mask))
    return step, np.mean(tables, axis=0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="a run folder with a complete checkpoint")
    parser.add_argument("--batches", type=int, default=20, help="batches of the run's batch size")
    parser.add_argument("--seed", type=int, default=0, help="draws the batches")
    parser.add_argument("--uniform", action="store_true", help="draw without priorities (priority_alpha 0)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    step, table = probe(args.run, args.batches, args.seed, args.uniform)
    drawn = "uniformly" if args.uniform else "as training draws them"
    print(
        f"{args.run} at training step {step}: means over {args.batches} batches drawn {drawn} (nats; squared errors on values)"
    )
    print("| k | " + " | ".join(COLUMNS) + " |")
    print("| --- " * (len(COLUMNS) + 1) + "|")
    for k, row in enumerate(table):
        print(f"| {k} | " + " | ".join(f"{x:.3f}" for x in row) + " |")
    print("| all | " + " | ".join(f"{x:.3f}" for x in table.sum(axis=0)) + " |  (summed over k, as the losses)")


if __name__ == "__main__":
    main()
