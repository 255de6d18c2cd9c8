"""Training targets: the `Batch` and the pseudocode's `make_target` for a batch of positions.

`make_batch` is the readable definition (position by position with `Game.make_target`);
`make_batch_vectorized` computes the same arrays at once from the flat copy of the window
(`FlatGames`), and a test holds the two equal.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from muzero.game import Game
from muzero.replay.flat import FlatGames, move_row, n_step_values, stack_images


class Batch(NamedTuple):
    """A training batch as numpy arrays (B = batch size, K = num_unroll_steps, A = actions).

    Attributes:
      observation: [B, *image_shape], make_image(i): float32, or uint8 for Atari frames
        (the network scales them).
      actions: [B, K] int32, history[i:i+K]; past the end of a game, random actions.
      target_value: [B, K+1] n-step value targets (0 on absorbing states).
      target_reward: [B, K+1] reward of the transition into each state (0 at k=0).
      target_policy: [B, K+1, A] root visit distributions (zeros on absorbing states).
      policy_mask: [B, K+1] 1 where a policy target exists, 0 on absorbing states.
      importance_weight: [B] float32, prioritized replay's (1 / (N * P(i)))^beta that scales
        each sample's loss; None: uniform sampling, every weight 1.
      unroll_observation: [B, K, *image_shape], make_image(i + k) for k = 1..K, clipped to
        the game's last state: the targets of `train.consistency_loss_weight`; None when off.
      unroll_mask: [B, K] float32, 1 where i + k is a state of the game (its last included).
    """

    observation: np.ndarray
    actions: np.ndarray
    target_value: np.ndarray
    target_reward: np.ndarray
    target_policy: np.ndarray
    policy_mask: np.ndarray
    importance_weight: np.ndarray | None = None
    unroll_observation: np.ndarray | None = None
    unroll_mask: np.ndarray | None = None

    def take(self, rows) -> Batch:
        """The batch of the given rows (an index, slice or mask) of every field, as copies;
        absent fields stay None."""
        return Batch(*(None if field is None else np.array(field[rows]) for field in self))


def make_batch(games_positions: list[tuple[Game, int]], padding: np.ndarray, num_unroll_steps: int, td_steps) -> Batch:
    """The batch for given (game, position) pairs, position by position with `make_target`.

    The readable definition; `make_batch_vectorized` computes the same arrays at once.

    Args:
      padding: [B, K] actions used where fewer than K actions remain in a game.
      td_steps: n, or a sequence of each pair's n (the off-policy correction).
    """
    horizons = np.broadcast_to(np.asarray(td_steps).reshape(-1), (len(games_positions),))
    observations, actions, values, rewards, policies, masks = [], [], [], [], [], []
    for row, (g, i) in enumerate(games_positions):
        observations.append(g.make_image(i))
        history = g.history[i : i + num_unroll_steps]
        # Fewer than K actions remain near the end: pad with random actions.
        # Their states are absorbing (value 0, reward 0, no policy loss).
        actions.append(list(history) + padding[row, len(history) :].tolist())
        targets = g.make_target(i, num_unroll_steps, int(horizons[row]), g.to_play())
        values.append([value for value, _, _ in targets])
        rewards.append([reward for _, reward, _ in targets])
        policies.append([policy if policy else [0.0] * g.action_space_size for _, _, policy in targets])
        masks.append([1.0 if policy else 0.0 for _, _, policy in targets])
    return Batch(
        observation=stack_images(observations),
        actions=np.asarray(actions, np.int32),
        target_value=np.asarray(values, np.float32),
        target_reward=np.asarray(rewards, np.float32),
        target_policy=np.asarray(policies, np.float32),
        policy_mask=np.asarray(masks, np.float32),
    )


# The pseudocode's make_target for a whole batch: every index is computed for all B
# samples and K + 1 unroll steps at once, with masks where it runs past a game's end.
def make_batch_vectorized(
    flat: FlatGames,
    game_index: np.ndarray,
    positions: np.ndarray,
    padding: np.ndarray,
    num_unroll_steps: int,
    td_steps: int | np.ndarray,
    discount: float,
    bootstrap_values: np.ndarray | None = None,
    fresh_rows: int = 0,
) -> Batch:
    """`make_batch` for (flat game index, position) pairs; same arrays, numpy-vectorised.

    Args:
      game_index, positions: [B] the flat game index and the move index of each sample.
      padding: [B, K] actions used where fewer than K actions remain in a game.
      td_steps: n, or [B, 1] each sample's n (`ReplayBuffer.value_horizons`).
      bootstrap_values: Reanalyse: [B, K + 1] values (see `n_step_values`) that replace the
        stored root values the value targets bootstrap from.
      fresh_rows: Reanalyse: the first `fresh_rows` rows take their policy targets from the
        reanalysed visits of each position that has some.
    """
    length = flat.length[game_index][:, None]  # [B, 1]
    start = flat.move_start[game_index][:, None]

    def at(index):  # row of a move index inside its game, clipped to the game
        return move_row(start, length, index)

    k = positions[:, None] + np.arange(num_unroll_steps)  # [B, K]
    actions = np.where(k < length, flat.actions[at(k)], padding)

    index = positions[:, None] + np.arange(num_unroll_steps + 1)  # [B, K + 1]
    inside = index < length
    value = n_step_values(flat, game_index[:, None], index, td_steps, discount, bootstrap_values)
    last_reward = np.where((index > 0) & (index <= length), flat.rewards[at(index - 1)], 0.0)
    visits = flat.child_visits[at(index)]
    if fresh_rows:
        fresh = (flat.reanalysed_step[at(index)] >= 0) & (np.arange(len(index)) < fresh_rows)[:, None]
        visits = np.where(fresh[..., None], flat.fresh_visits[at(index)], visits)
    policy = np.where(inside[..., None], visits, 0.0)
    return Batch(
        observation=flat.images(game_index, positions),
        actions=actions.astype(np.int32),
        target_value=np.where(inside, value, 0.0).astype(np.float32),
        target_reward=last_reward.astype(np.float32),
        target_policy=policy.astype(np.float32),
        policy_mask=inside.astype(np.float32),
    )


def value_prefix_targets(target_reward: np.ndarray, horizon: int) -> np.ndarray:
    """EfficientZero's value-prefix targets (Ye et al. 2021, section 4.2): at unroll step k >= 1,
    the sum of the rewards u_{t+j} into steps j = k0..k, where k0 = horizon * ((k - 1) // horizon) + 1
    is the first step after the last reset of the network's LSTM (it restarts after every
    `horizon` steps). Step 0 keeps 0 (no reward loss there).

    Args:
      target_reward: [B, K + 1] `Batch.target_reward` (reward into each step, 0 at k = 0 and
        past a game's end).
      horizon: `network.value_prefix_horizon`.

    Returns:
      [B, K + 1] float32.
    """
    prefix = np.zeros_like(target_reward, dtype=np.float32)
    running = np.zeros(len(target_reward), np.float32)
    for k in range(1, target_reward.shape[1]):
        if (k - 1) % horizon == 0:  # the LSTM restarted before step k
            running = np.zeros_like(running)
        running = running + target_reward[:, k]
        prefix[:, k] = running
    return prefix


def unroll_observations(
    flat: FlatGames, game_index: np.ndarray, positions: np.ndarray, num_unroll_steps: int
) -> tuple[np.ndarray, np.ndarray]:
    """The real observations along each unroll, for the consistency loss.

    Returns:
      ([B, K, *image_shape] make_image(position + k) for k = 1..K, the index clipped to the
      game's last state; [B, K] float32 mask, 1 where position + k <= the game's length,
      so that the final observation of a finished game counts and padding past it does not).
    """
    length = flat.length[game_index][:, None]  # [B, 1]
    index = positions[:, None] + np.arange(1, num_unroll_steps + 1)  # [B, K]
    images = flat.images(np.repeat(game_index, num_unroll_steps), np.minimum(index, length).ravel())
    return images.reshape(*index.shape, *images.shape[1:]), (index <= length).astype(np.float32)
