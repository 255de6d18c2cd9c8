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
        self.discount = config.discount
        self._flat: FlatGames | None = None

    def save_game(self, game: Game) -> None:
        # The deque drops the oldest game once the window is full.
        if self._flat is not None:
            if len(self.buffer) == self.window_size:
                self._flat.drop_oldest()
            self._flat.append(game)
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
        self._flat = None

    def num_positions(self) -> int:
        return sum(len(game) for game in self.buffer)

    def sample_batch(self, num_unroll_steps: int, td_steps: int) -> Batch:
        """Samples batch_size positions and their targets (pseudocode `sample_batch`).

        Draws (game, position) pairs as `sample_game` / `sample_position` do, then builds
        the targets for the whole batch at once with `make_batch_vectorized`, which is
        tested equal to the per-position `make_batch` (the pseudocode's `make_target`).
        """
        probabilities = self._game_probabilities()
        count = len(self.buffer)
        if probabilities is None:
            game_index = self.rng.integers(count, size=self.batch_size)
        else:
            game_index = self.rng.choice(count, size=self.batch_size, p=probabilities)
        flat = self._flat_games()
        positions = np.floor(self.rng.random(self.batch_size) * flat.length[game_index]).astype(np.int64)
        padding = self.rng.integers(self.action_space_size, size=(self.batch_size, num_unroll_steps))
        return make_batch_vectorized(flat, game_index, positions, padding, num_unroll_steps, td_steps,
                                     self.discount)

    def _flat_games(self) -> FlatGames:
        if self._flat is None:
            self._flat = FlatGames(list(self.buffer), self.action_space_size)
        return self._flat

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


def make_batch(games_positions: list[tuple[Game, int]], padding: np.ndarray, num_unroll_steps: int,
               td_steps: int) -> Batch:
    """The batch for given (game, position) pairs, position by position with `make_target`.

    The readable definition; `make_batch_vectorized` computes the same arrays at once.

    Args:
      padding: [B, K] actions used where fewer than K actions remain in a game.
    """
    observations, actions, values, rewards, policies, masks = [], [], [], [], [], []
    for row, (g, i) in enumerate(games_positions):
        observations.append(g.make_image(i))
        history = g.history[i:i + num_unroll_steps]
        # Fewer than K actions remain near the end: pad with random actions.
        # Their states are absorbing (value 0, reward 0, no policy loss).
        actions.append(list(history) + padding[row, len(history):].tolist())
        targets = g.make_target(i, num_unroll_steps, td_steps, g.to_play())
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


def stack_images(images: list[np.ndarray]) -> np.ndarray:
    """[B, *image_shape]: uint8 images stay uint8 (the network scales them), others become float32."""
    batch = np.stack(images)
    return batch if batch.dtype == np.uint8 else batch.astype(np.float32, copy=False)


class FlatGames:
    """The buffer's games as flat arrays, for vectorised batches, kept up to date incrementally.

    Moves of game g are rows move_start[g] .. move_start[g] + length[g] - 1 of actions /
    rewards / root_values / child_visits. Observations are not copied: `images` builds
    them from the games themselves, so each frame is stored once. New games are appended (capacity doubles when full); evicted games only
    leave their rows unused, and the arrays are compacted once more than half is unused,
    so each game's rows are copied O(1) times on average.
    """

    def __init__(self, games: list[Game], action_space_size: int):
        self.action_space_size = action_space_size
        self._rebuild(games)

    def _rebuild(self, games: list[Game]) -> None:
        self._games: list[Game] = []
        self._starts: list[tuple[int, int]] = []
        self._moves_used = 0
        self.actions = self.rewards = self.root_values = self.child_visits = None
        self._reindex()
        for game in games:
            self.append(game)

    def append(self, game: Game) -> None:
        n = len(game)
        if self.actions is None:
            self._allocate(max(n, 1024))
        if self._moves_used + n > len(self.actions):
            self._allocate(2 * (self._moves_used + n))
        m = self._moves_used
        self.actions[m:m + n] = game.history
        self.rewards[m:m + n] = game.rewards
        self.root_values[m:m + n] = game.root_values
        self.child_visits[m:m + n] = np.asarray(game.child_visits, np.float64).reshape(n, self.action_space_size)
        self._games.append(game)
        self._starts.append(m)
        self._moves_used = m + n
        self._reindex()

    def drop_oldest(self) -> None:
        self._games.pop(0)
        self._starts.pop(0)
        live = sum(len(game) for game in self._games)
        if self._moves_used > 2 * max(live, 1024):
            self._rebuild(self._games)
        else:
            self._reindex()

    def _allocate(self, moves: int) -> None:
        def grow(old, shape, dtype):
            new = np.zeros(shape, dtype)
            if old is not None:
                new[:len(old)] = old
            return new

        self.actions = grow(self.actions, (moves,), np.int64)
        self.rewards = grow(self.rewards, (moves,), np.float64)
        self.root_values = grow(self.root_values, (moves,), np.float64)
        self.child_visits = grow(self.child_visits, (moves, self.action_space_size), np.float64)

    def _reindex(self) -> None:
        """Per-game index arrays for the games in the window (a few hundred entries)."""
        self.length = np.array([len(game) for game in self._games], np.int64)
        self.move_start = np.array(self._starts, np.int64)
        self.has_bootstrap = np.array([game.bootstrap_value is not None for game in self._games], bool)
        self.bootstrap_value = np.array([game.bootstrap_value or 0.0 for game in self._games], np.float64)

    def images(self, game_index: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """make_image(position) of each (game, position) pair, stacked: [B, *image_shape]."""
        return stack_images([self._games[g].make_image(i) for g, i in zip(game_index.tolist(), positions.tolist())])


# The pseudocode's make_target for a whole batch: every index is computed for all B
# samples and K + 1 unroll steps at once, with masks where it runs past a game's end.
def make_batch_vectorized(flat: FlatGames, game_index: np.ndarray, positions: np.ndarray, padding: np.ndarray,
                          num_unroll_steps: int, td_steps: int, discount: float) -> Batch:
    """`make_batch` for (flat game index, position) pairs; same arrays, numpy-vectorised."""
    length = flat.length[game_index][:, None]  # [B, 1]
    start = flat.move_start[game_index][:, None]

    def at(index):  # row of a move index inside its game, clipped to the game
        return start + np.clip(index, 0, length - 1)

    k = positions[:, None] + np.arange(num_unroll_steps)  # [B, K]
    actions = np.where(k < length, flat.actions[at(k)], padding)

    index = positions[:, None] + np.arange(num_unroll_steps + 1)  # [B, K + 1]
    inside = index < length
    bootstrap = index + td_steps
    # Past the end: 0 (absorbing), or for a game cut by a time limit its final value.
    cut = flat.has_bootstrap[game_index][:, None]
    final = np.where(cut, flat.bootstrap_value[game_index][:, None] * discount ** np.maximum(length - index, 0), 0.0)
    value = np.where(bootstrap < length, flat.root_values[at(bootstrap)] * discount**td_steps, final)
    j = np.arange(td_steps)
    reward_index = index[..., None] + j  # [B, K + 1, td]
    rewards = np.where(reward_index < length[..., None], flat.rewards[start[..., None] +
                       np.clip(reward_index, 0, length[..., None] - 1)], 0.0)
    value = value + (rewards * discount ** j.astype(np.float64)).sum(-1)
    last_reward = np.where((index > 0) & (index <= length), flat.rewards[at(index - 1)], 0.0)
    policy = np.where(inside[..., None], flat.child_visits[at(index)], 0.0)
    return Batch(
        observation=flat.images(game_index, positions),
        actions=actions.astype(np.int32),
        target_value=np.where(inside, value, 0.0).astype(np.float32),
        target_reward=last_reward.astype(np.float32),
        target_policy=policy.astype(np.float32),
        policy_mask=inside.astype(np.float32),
    )
