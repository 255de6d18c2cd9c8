"""How far a run's model is from its game's symmetry: a state's values and policy against its mirror image's.

    python scripts/probe_symmetry.py --run runs/cp_X/seed-1 [--step 3500] [--episodes 8] [--seed 12345]

A game whose rules keep a symmetry s (`replay.augment_symmetries`; CartPole: every number of
the state negated, left and right swapped) has the same true values on a state x and on its
image s(x): v(s(x)) = v(x) and Q(s(x), s(a)) = Q(x, a). A model that breaks this prefers one
side for no reason in the game, and a search that reads its values plays that preference.

Plays `--episodes` games with the policy head's largest action (no search; ties to the larger,
as `probe_model.py`), and at every position played reads, for the observation and for its image
under each symmetry but the identity: the model's value v, its Q(a) = r_1 + discount v_1 after one
step of the dynamics, and the policy head's probabilities. It prints the mean absolute gaps
between a state's and its image's (the image's actions mapped back), and how often the model's
largest Q, mapped, is not its image's largest. Then the same at the all-zero observation, which
every symmetry here maps to itself (CartPole's cart at rest in the centre, the pole upright and
still): there the true Q of each action and of its image are the same number, so any gap is
the model's alone. Only one-player games with flat observations of one frame.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from probe_model import head_actions

from muzero.symmetries import apply_symmetry

ROOT = Path(__file__).resolve().parents[1]


def model_readings(network, observations: np.ndarray, discount: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(value [N], Q [N, A]: r_1 + discount v_1 of each action after one step of the dynamics,
    policy [N, A]: the head's softmax) of [N, D] observations."""
    output = network.initial_inference(observations)
    logits = np.asarray(output.policy_logits, np.float64)
    actions = logits.shape[1]
    policy = np.exp(logits - logits.max(axis=1, keepdims=True))
    policy /= policy.sum(axis=1, keepdims=True)
    q = np.zeros_like(logits)
    for a in range(actions):
        step = network.recurrent_inference(output.hidden_state, np.full(len(observations), a, np.int32))
        q[:, a] = np.asarray(step.reward, np.float64) + discount * np.asarray(step.value, np.float64)
    return np.asarray(output.value, np.float64), q, policy


def mirror_gaps(readings: tuple, image_readings: tuple, action: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Per state [N]: |v - v'|, the mean over actions of |Q(a) - Q'(s(a))| and of |P(a) - P'(s(a))|,
    and whether s(the largest Q's action) is not the image's largest (ties to the larger), where '
    reads the image and s(a) = action[a]."""
    value, q, policy = readings
    image_value, image_q, image_policy = image_readings
    mapped = list(action)
    return {
        "value": np.abs(value - image_value),
        "q": np.abs(q - image_q[:, mapped]).mean(axis=1),
        "policy": np.abs(policy - image_policy[:, mapped]).mean(axis=1),
        "disagree": np.asarray(action)[head_actions(q)] != head_actions(image_q),
    }


def head_positions(network, environments: list, max_moves: int) -> tuple[np.ndarray, list[int]]:
    """Every observation of one game per environment played by the policy head's largest action
    (ties to the larger), [N, D], and each game's length."""
    observations, lengths = [], []
    for environment in environments:
        observation, moves = environment.reset(), 0
        done = False
        while not done and moves < max_moves:
            observations.append(observation)
            action = int(head_actions(np.asarray(network.initial_inference(observation[None]).policy_logits))[0])
            observation, _, terminated, truncated = environment.step(action)
            done, moves = terminated or truncated, moves + 1
        lengths.append(moves)
    return np.stack(observations), lengths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="a run folder with a complete checkpoint")
    parser.add_argument("--step", type=int, help="the checkpoint's training step (default: the newest)")
    parser.add_argument("--episodes", type=int, default=8, help="games played by the policy head")
    parser.add_argument("--seed", type=int, default=12345, help="environment seed (evaluation's)")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes: expected at least 1, got {args.episodes}")
    sys.path.insert(0, str(ROOT))
    from muzero.tf_runtime import load_tensorflow

    load_tensorflow()
    from muzero.checkpoints import CheckpointError
    from muzero.config_io import ConfigError
    from muzero.envs import make_environments
    from muzero.evaluation import load_run

    try:
        config, spec, network, step = load_run(args.run, step=args.step)
    except (CheckpointError, ConfigError, ValueError) as error:  # each names its file
        parser.error(str(error))
    if len(spec.symmetries) < 2 or spec.num_players != 1 or len(spec.observation_shape) != 1:
        parser.error(f"{args.run}: this probe reads one-player games with flat observations and a known symmetry")
    discount = config.game.discount
    environments = make_environments(config.game, args.episodes, args.seed)
    observations, lengths = head_positions(network, environments, config.game.max_moves)
    zero = np.zeros((1, observations.shape[1]), observations.dtype)
    print(
        f"{args.run} at training step {step}: {len(observations)} positions of {len(lengths)} games played by the "
        f"policy head ({np.mean(lengths):.1f} moves on average)"
    )
    readings = model_readings(network, observations, discount)
    value, q, policy = model_readings(network, zero, discount)  # the zero state is every symmetry's own image
    for number, symmetry in enumerate(spec.symmetries[1:], start=1):
        gaps = mirror_gaps(
            readings, model_readings(network, apply_symmetry(observations, symmetry), discount), symmetry.action
        )
        print(
            f"symmetry {number} (actions {symmetry.action}): mean |v - v'| {gaps['value'].mean():.2f} (mean |v| "
            f"{np.abs(readings[0]).mean():.2f}), mean |Q - Q'| {gaps['q'].mean():.2f}, mean |P - P'| "
            f"{gaps['policy'].mean():.3f}; the largest Q's image is not the image's largest at "
            f"{gaps['disagree'].mean():.3f} of the positions"
        )
        image = model_readings(network, apply_symmetry(zero, symmetry), discount)
        at_zero = mirror_gaps((value, q, policy), image, symmetry.action)
        print(
            f"  at the all-zero observation: v {value[0]:.2f}, Q {' / '.join(f'{x:.2f}' for x in q[0])}, policy "
            f"{' / '.join(f'{x:.3f}' for x in policy[0])}; mean |Q - Q'| {at_zero['q'][0]:.2f}, mean |P - P'| "
            f"{at_zero['policy'][0]:.3f}"
        )
    for environment in environments:
        environment.close()


if __name__ == "__main__":
    main()
