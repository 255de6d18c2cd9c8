"""`ReplayBuffer`: the newest `window_size` games, sampled into training batches."""

from __future__ import annotations

import collections
from typing import NamedTuple

import numpy as np

from muzero.config import MuZeroConfig
from muzero.game import Game


class Batch(NamedTuple):
    """A training batch as numpy arrays (B = batch size, K = num_unroll_steps, A = actions).

    Attributes:
      observation: [B, *observation_shape], make_image(i).
      actions: [B, K] int32, history[i:i+K]; past the end of a game, random actions.
      target_value: [B, K+1] n-step value targets (0 on absorbing states).
      target_reward: [B, K+1] reward of the transition into each state (0 at k=0).
      target_policy: [B, K+1, A] root visit distributions (zeros on absorbing states).
      policy_mask: [B, K+1] 1 where a policy target exists, 0 on absorbing states.
    """

    observation: np.ndarray
    actions: np.ndarray
    target_value: np.ndarray
    target_reward: np.ndarray
    target_policy: np.ndarray
    policy_mask: np.ndarray


class ReplayBuffer:
    """Keeps the newest `window_size` games; samples (game, position) pairs.

    Why a window of games: old games were played by old networks; the pseudocode
    forgets them by count of games, not of positions.
    """

    def __init__(self, config: MuZeroConfig, rng: np.random.Generator):
        self.window_size = config.replay.window_size
        self.batch_size = config.train.batch_size
        self.action_space_size = config.action_space_size
        self.sample_by = config.replay.sample_by
        self.buffer: collections.deque[Game] = collections.deque(maxlen=self.window_size)
        self.rng = rng
        self.games_saved = 0

    def save_game(self, game: Game) -> None:
        # The deque drops the oldest game once the window is full.
        self.buffer.append(game)
        self.games_saved += 1

    def __len__(self) -> int:
        return len(self.buffer)

    def state_dict(self) -> dict:
        """The buffer's contents as plain, picklable data (for checkpoints)."""
        return {"games": list(self.buffer), "games_saved": self.games_saved}

    def load_state_dict(self, state: dict) -> None:
        self.buffer = collections.deque(state["games"], maxlen=self.window_size)
        self.games_saved = state["games_saved"]

    def num_positions(self) -> int:
        return sum(len(game) for game in self.buffer)

    def sample_batch(self, num_unroll_steps: int, td_steps: int) -> Batch:
        """Samples batch_size positions and their targets (pseudocode `sample_batch`)."""
        probabilities = self._game_probabilities()
        games = [self.sample_game(probabilities) for _ in range(self.batch_size)]
        game_pos = [(g, self.sample_position(g)) for g in games]
        observations, actions, values, rewards, policies, masks = [], [], [], [], [], []
        for g, i in game_pos:
            observations.append(g.make_image(i))
            history = g.history[i:i + num_unroll_steps]
            # Fewer than K actions remain near the end: pad with random actions.
            # Their states are absorbing (value 0, reward 0, no policy loss).
            padding = self.rng.integers(self.action_space_size, size=num_unroll_steps - len(history))
            actions.append(list(history) + padding.tolist())
            targets = g.make_target(i, num_unroll_steps, td_steps, g.to_play())
            values.append([value for value, _, _ in targets])
            rewards.append([reward for _, reward, _ in targets])
            policies.append([policy if policy else [0.0] * self.action_space_size for _, _, policy in targets])
            masks.append([1.0 if policy else 0.0 for _, _, policy in targets])
        return Batch(
            observation=np.asarray(observations, np.float32),
            actions=np.asarray(actions, np.int32),
            target_value=np.asarray(values, np.float32),
            target_reward=np.asarray(rewards, np.float32),
            target_policy=np.asarray(policies, np.float32),
            policy_mask=np.asarray(masks, np.float32),
        )

    def _game_probabilities(self) -> np.ndarray | None:
        if self.sample_by == "game":
            return None
        lengths = np.fromiter((len(g) for g in self.buffer), np.float64, len(self.buffer))
        return lengths / lengths.sum()

    def sample_game(self, probabilities: np.ndarray | None = None) -> Game:
        """A game from the buffer: uniform over games ("game", as the pseudocode), or
        proportional to length ("position", the default) so every stored position is
        equally likely and short early games do not dominate.

        Args:
          probabilities: [num_games], precomputed by `sample_batch`; None computes them.
        """
        if probabilities is None:
            probabilities = self._game_probabilities()
        if probabilities is None:
            return self.buffer[int(self.rng.integers(len(self.buffer)))]
        return self.buffer[int(self.rng.choice(len(self.buffer), p=probabilities))]

    def sample_position(self, game: Game) -> int:
        """A position uniformly among the moves of `game`."""
        return int(self.rng.integers(len(game)))
