"""`ReplayBuffer`: the newest `window_size` games, sampled into training batches."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from muzero.config import MuZeroConfig
from muzero.game import Game
from muzero.symmetries import Symmetry, augment_batch


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


def priority(value: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Prioritized replay's priority of a position (paper appendix): |value - n-step value target|.

    `value` is the root search value when the game is saved, then the network's value
    at k = 0 when the position is trained on; [B] float64 out.
    """
    return np.abs(np.asarray(value, np.float64) - np.asarray(target, np.float64))


class ReplayBuffer:
    """Keeps the newest `window_size` games; samples (game, position) pairs.

    Why a window of games: old games were played by old networks; the pseudocode
    forgets them by count of games, not of positions.
    """

    def __init__(self, config: MuZeroConfig, rng: np.random.Generator, symmetries: tuple[Symmetry, ...] = ()):
        self.window_size = config.replay.window_size
        self.batch_size = config.train.batch_size
        self.action_space_size = config.action_space_size
        self.sample_by = config.replay.sample_by
        self.buffer: collections.deque[Game] = collections.deque(maxlen=self.window_size)
        self.rng = rng
        self.games_saved = 0
        self.discount = config.discount
        self.td_steps = config.train.td_steps
        self.priority_alpha = config.replay.priority_alpha
        self.priority_beta = config.replay.priority_beta
        self.priority_epsilon = config.replay.priority_epsilon
        self.normalize_importance_weights = config.replay.normalize_importance_weights
        # Reanalyse (muzero/reanalyse.py): the flat copy keeps each position's reanalysed
        # statistics; `sample_batch` takes policy targets from them for the first
        # `reanalyse_fraction` of each batch, and value targets bootstrap through
        # `bootstrap_value_fn` (the target network) when it is set.
        self.reanalyse_fraction = config.reanalyse.fraction
        self.bootstrap_value_fn: Callable[[np.ndarray], np.ndarray] | None = None
        self._flat: FlatGames | None = None
        # Flat rows of the positions in the last batch, and the FlatGames layout they
        # belong to: `update_priorities` writes there (Batch stays free of bookkeeping).
        self.last_sampled: np.ndarray | None = None
        self._sampled_layout = -1
        # Reanalyse: the reanalysed step of the policy target at k = 0 of the batch's first
        # round(fraction * B) rows (-1: self-play's statistics), for summaries.
        self.last_reanalysed: np.ndarray | None = None
        # `replay.augment_symmetries`: each sampled row mapped by one of these, drawn from
        # `rng` (so exact resume covers it); () leaves batches, and the RNG stream, as they are.
        self.symmetries = tuple(symmetries) if config.replay.augment_symmetries else ()
        # `train.consistency_loss_weight` > 0: batches carry the observations along the unroll.
        self.with_unroll_observations = config.train.consistency_loss_weight > 0

    def save_game(self, game: Game, training_step: int = 0) -> None:
        """Adds a finished game; `training_step`: the learner's step when it arrives (the age
        of its search statistics, for Reanalyse)."""
        game.saved_step = training_step
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
        """The buffer's contents as plain, picklable data (for checkpoints).

        Each game carries its positions' current priorities (`game.priorities`), so a
        resumed run samples exactly as the uninterrupted one.
        """
        if self._flat is not None:
            self._flat.store_priorities()
            self._flat.store_reanalysis()
        return {"games": list(self.buffer), "games_saved": self.games_saved}

    def load_state_dict(self, state: dict) -> None:
        self.buffer = collections.deque(state["games"], maxlen=self.window_size)
        self.games_saved = state["games_saved"]
        self._flat = None
        self.last_sampled = None

    def num_positions(self) -> int:
        return sum(len(game) for game in self.buffer)

    def sample_batch(self, num_unroll_steps: int, td_steps: int) -> Batch:
        """Samples batch_size positions and their targets (pseudocode `sample_batch`).

        Draws (game, position) pairs as `sample_game` / `sample_position` do, then builds
        the targets for the whole batch at once with `make_batch_vectorized`, which is
        tested equal to the per-position `make_batch` (the pseudocode's `make_target`).
        With `replay.priority_alpha` > 0 the positions are drawn by priority instead
        (`sample_prioritized`) and the batch carries their importance weights. The
        sampled rows are kept in `last_sampled` for `update_priorities`.

        With Reanalyse on, the first round(fraction * B) rows take their policy targets from
        the positions' reanalysed statistics where they have some (`fresh_rows`), and value
        targets bootstrap from `bootstrap_value_fn`'s values (the target network).
        """
        flat = self._flat_games()
        importance_weight = None
        if self.priority_alpha > 0:
            game_index, positions, importance_weight = self.sample_prioritized()
        else:
            probabilities = self._game_probabilities()
            count = len(self.buffer)
            if probabilities is None:
                game_index = self.rng.integers(count, size=self.batch_size)
            else:
                game_index = self.rng.choice(count, size=self.batch_size, p=probabilities)
            positions = np.floor(self.rng.random(self.batch_size) * flat.length[game_index]).astype(np.int64)
        self.last_sampled, self._sampled_layout = flat.move_start[game_index] + positions, flat.layout
        padding = self.rng.integers(self.action_space_size, size=(self.batch_size, num_unroll_steps))
        bootstrap = None
        if self.bootstrap_value_fn is not None:
            observation_index = np.minimum(
                positions[:, None] + np.arange(num_unroll_steps + 1) + td_steps, flat.length[game_index][:, None]
            )  # [B, K + 1]
            rows = np.repeat(game_index, num_unroll_steps + 1)
            values = self.bootstrap_value_fn(flat.images(rows, observation_index.ravel()))
            bootstrap = np.asarray(values, np.float64).reshape(observation_index.shape)
        fresh_rows = round(self.reanalyse_fraction * self.batch_size) if flat.reanalyse else 0
        batch = make_batch_vectorized(
            flat, game_index, positions, padding, num_unroll_steps, td_steps, self.discount, bootstrap, fresh_rows
        )
        if fresh_rows:
            self.last_reanalysed = flat.reanalysed_step[self.last_sampled[:fresh_rows]]
        if self.with_unroll_observations:
            observation, mask = unroll_observations(flat, game_index, positions, num_unroll_steps)
            batch = batch._replace(unroll_observation=observation, unroll_mask=mask)
        if self.symmetries:
            batch = augment_batch(batch, self.symmetries, self.rng)
        return batch._replace(importance_weight=importance_weight)

    def store_reanalysis(self, rows: np.ndarray, layout: int, result, training_step: int) -> float:
        """Writes Reanalyse's search results for flat rows `rows` (of flat layout `layout`).

        Args:
          result: `SearchResult`: its visit counts [N, A] are stored, normalised.
          training_step: the step of the network that searched.

        Returns:
          the mean age, in training steps, of the statistics replaced (self-play's or an
          earlier reanalysis); NaN when the rows moved since they were chosen (nothing written).
        """
        flat = self._flat_games()
        if flat.layout != layout:
            return float("nan")
        game_index = np.searchsorted(flat.move_start, rows, side="right") - 1
        before = flat.search_step(rows, game_index)
        visits = np.asarray(result.visit_counts, np.float64)
        flat.fresh_visits[rows] = visits / visits.sum(-1, keepdims=True)
        flat.reanalysed_step[rows] = training_step
        return float(np.mean(training_step - before))

    def fraction_reanalysed(self) -> float:
        """Share of the positions in the window that were reanalysed at least once."""
        flat = self._flat_games()
        rows = flat.window()[2]
        return float((flat.reanalysed_step[rows] >= 0).mean()) if len(rows) and flat.reanalyse else 0.0

    def _flat_games(self) -> FlatGames:
        if self._flat is None:
            self._flat = FlatGames(
                list(self.buffer),
                self.action_space_size,
                self.td_steps,
                self.discount,
                reanalyse=self.reanalyse_fraction > 0,
            )
        return self._flat

    # Why (paper appendix, after Schaul et al. 2016, "Prioritized Experience Replay"):
    # positions whose value the network still predicts badly are drawn more often, and
    # each sample's loss is scaled by (1 / (N * P(i)))^beta, which with beta = 1 makes the
    # expected weighted loss the loss under uniform sampling again. Computed over the
    # whole window with numpy for every batch: O(N) (a sum tree would draw in O(log N)).
    def priority_probabilities(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """P(i) = (p_i + epsilon)^alpha / sum_j (p_j + epsilon)^alpha over the window.

        Returns:
          (probability, game_index, position), each [N] for the N positions in the window,
          game by game (oldest first), position by position.
        """
        flat = self._flat_games()
        game_index, positions, rows = flat.window()
        scaled = (flat.priorities[rows] + self.priority_epsilon) ** self.priority_alpha
        total = scaled.sum()
        if not total > 0:  # every priority 0 with epsilon 0: nothing to prefer
            scaled, total = np.ones_like(scaled), float(len(scaled))
        return scaled / total, game_index, positions

    def sample_prioritized(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """batch_size positions drawn with probability P(i), with their importance weights.

        Returns:
          (game_index, positions, importance_weight): [B] int64, [B] int64, [B] float32
          (1 / (N * P(i)))^beta, divided by the batch's largest with
          `replay.normalize_importance_weights`.
        """
        probability, game_index, positions = self.priority_probabilities()
        cumulative = np.cumsum(probability)
        draws = np.searchsorted(cumulative, self.rng.random(self.batch_size) * cumulative[-1], side="right")
        draws = np.minimum(draws, len(probability) - 1)  # u * total rounded up to the total
        importance_weight = (1.0 / (len(probability) * probability[draws])) ** self.priority_beta
        if self.normalize_importance_weights:
            importance_weight = importance_weight / importance_weight.max()
        return game_index[draws], positions[draws], importance_weight.astype(np.float32)

    def refresh_priorities(self, batch: Batch, initial_value: np.ndarray) -> None:
        """After a training step on `batch`: priority |v - z| of its positions, v the value the
        network predicted at k = 0 ([B]), z the batch's scalar n-step value target."""
        self.update_priorities(priority(initial_value, batch.target_value[:, 0]))

    def update_priorities(self, priorities: np.ndarray) -> None:
        """Sets the priorities of the positions of the last batch (after a training step).

        Args:
          priorities: [B] new |value - n-step value target| of the `last_sampled` positions.
            Ignored when the flat copy was rebuilt since the batch was drawn (its rows moved).
        """
        if self.last_sampled is None or self._flat is None or self._flat.layout != self._sampled_layout:
            return
        self._flat.priorities[self.last_sampled] = priorities

    def priority_mean(self) -> float:
        """Mean priority |value - target| over the positions in the window (for summaries)."""
        flat = self._flat_games()
        rows = flat.window()[2]
        return float(flat.priorities[rows].mean()) if len(rows) else 0.0

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


def make_batch(
    games_positions: list[tuple[Game, int]], padding: np.ndarray, num_unroll_steps: int, td_steps: int
) -> Batch:
    """The batch for given (game, position) pairs, position by position with `make_target`.

    The readable definition; `make_batch_vectorized` computes the same arrays at once.

    Args:
      padding: [B, K] actions used where fewer than K actions remain in a game.
    """
    observations, actions, values, rewards, policies, masks = [], [], [], [], [], []
    for row, (g, i) in enumerate(games_positions):
        observations.append(g.make_image(i))
        history = g.history[i : i + num_unroll_steps]
        # Fewer than K actions remain near the end: pad with random actions.
        # Their states are absorbing (value 0, reward 0, no policy loss).
        actions.append(list(history) + padding[row, len(history) :].tolist())
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
    rewards / root_values / child_visits / priorities. Observations are not copied: `images`
    builds them from the games themselves, so each frame is stored once. New games are
    appended (capacity doubles when full); evicted games only
    leave their rows unused, and the arrays are compacted once more than half is unused,
    so each game's rows are copied O(1) times on average.

    priorities[row] is prioritized replay's |root value - n-step value target| of the move
    (without epsilon): the game's stored `game.priorities` when it has them (a resumed
    run), else computed when the game is appended, then refreshed by training.

    With `reanalyse`, fresh_visits / reanalysed_step hold each move's newest reanalysed root
    visit distribution and the training step it was searched at (-1: never reanalysed);
    `Game.reanalysis` carries them across checkpoints. (Reanalysed root values are not
    kept: value targets bootstrap from the target network instead, as in the paper.)

    Args:
      games: the games in the window, oldest first.
      action_space_size: A.
      td_steps, discount: of the n-step value target used for the initial priorities.
      reanalyse: keep the reanalysed statistics.
    """

    def __init__(
        self, games: list[Game], action_space_size: int, td_steps: int, discount: float, reanalyse: bool = False
    ):
        self.action_space_size = action_space_size
        self.td_steps, self.discount = td_steps, discount
        self.reanalyse = reanalyse
        self.layout = -1  # counts rebuilds: rows keep their meaning until the next one
        self._rebuild(games)

    def _rebuild(self, games: list[Game]) -> None:
        self.layout += 1
        self.priorities = self.players = None
        self.fresh_visits = self.reanalysed_step = None
        self._games: list[Game] = []
        self._starts: list[int] = []
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
        self.actions[m : m + n] = game.history
        self.rewards[m : m + n] = game.rewards
        self.root_values[m : m + n] = game.root_values
        self.child_visits[m : m + n] = np.asarray(game.child_visits, np.float64).reshape(n, self.action_space_size)
        if game.players is not None:
            self.players[m : m + n] = game.players[:n]
        self._games.append(game)
        self._starts.append(m)
        self._moves_used = m + n
        self._reindex()
        if self.reanalyse:
            self.reanalysed_step[m : m + n] = -1
            if game.reanalysis is not None:
                self.fresh_visits[m : m + n], self.reanalysed_step[m : m + n] = game.reanalysis
        if game.priorities is not None and len(game.priorities) == n:
            self.priorities[m : m + n] = game.priorities
        else:
            position = np.arange(n)
            target = n_step_values(self, np.full(n, len(self._games) - 1), position, self.td_steps, self.discount)
            self.priorities[m : m + n] = priority(self.root_values[m : m + n], target)

    def drop_oldest(self) -> None:
        self._games.pop(0)
        self._starts.pop(0)
        live = sum(len(game) for game in self._games)
        if self._moves_used > 2 * max(live, 1024):
            self.store_priorities()  # the rebuild appends the games again, with these
            self.store_reanalysis()
            self._rebuild(self._games)
        else:
            self._reindex()

    def _allocate(self, moves: int) -> None:
        def grow(old, shape, dtype):
            new = np.zeros(shape, dtype)
            if old is not None:
                new[: len(old)] = old
            return new

        self.actions = grow(self.actions, (moves,), np.int64)
        self.rewards = grow(self.rewards, (moves,), np.float64)
        self.root_values = grow(self.root_values, (moves,), np.float64)
        self.child_visits = grow(self.child_visits, (moves, self.action_space_size), np.float64)
        self.priorities = grow(self.priorities, (moves,), np.float64)
        self.players = grow(self.players, (moves,), np.int64)
        if self.reanalyse:
            self.fresh_visits = grow(self.fresh_visits, (moves, self.action_space_size), np.float32)
            self.reanalysed_step = grow(self.reanalysed_step, (moves,), np.int64)

    def _reindex(self) -> None:
        """Per-game index arrays for the games in the window (a few hundred entries)."""
        self.length = np.array([len(game) for game in self._games], np.int64)
        self.saved_step = np.array([game.saved_step for game in self._games], np.int64)
        self.move_start = np.array(self._starts, np.int64)
        self.has_bootstrap = np.array([game.bootstrap_value is not None for game in self._games], bool)
        self.bootstrap_value = np.array([game.bootstrap_value or 0.0 for game in self._games], np.float64)
        # Two players: the player to move after each game's last move (a cut game's bootstrap
        # value is theirs); None when every game has one player (no signs to apply).
        two_players = any(game.players is not None for game in self._games)
        self.final_player = (
            np.array([game.players[-1] if game.players is not None else 0 for game in self._games], np.int64)
            if two_players
            else None
        )

    def search_step(self, rows: np.ndarray, game_index: np.ndarray) -> np.ndarray:
        """Training step of the search behind each row's policy statistics (rows of the games
        `game_index`): its last reanalysis, else self-play's (the step its game entered replay)."""
        return np.where(self.reanalysed_step[rows] >= 0, self.reanalysed_step[rows], self.saved_step[game_index])

    def game(self, index: int) -> Game:
        """The game at flat game index `index` (0: the oldest in the window)."""
        return self._games[index]

    def images(self, game_index: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """make_image(position) of each (game, position) pair, stacked: [B, *image_shape]."""
        return stack_images([self._games[g].make_image(i) for g, i in zip(game_index.tolist(), positions.tolist())])

    def window(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every move of the games in the window, game by game: (game index, position, row), each [N]."""
        game_index = np.repeat(np.arange(len(self.length)), self.length)
        first = np.cumsum(self.length) - self.length  # index of each game's first move in [0, N)
        positions = np.arange(len(game_index)) - first[game_index]
        return game_index, positions, self.move_start[game_index] + positions

    def store_priorities(self) -> None:
        """Copies each game's current priorities onto it (`game.priorities`, [len(game)])."""
        for game, m in zip(self._games, self._starts):
            game.priorities = self.priorities[m : m + len(game)].copy()

    def store_reanalysis(self) -> None:
        """Copies each reanalysed game's statistics onto it (`game.reanalysis`)."""
        if not self.reanalyse:
            return
        for game, m in zip(self._games, self._starts):
            rows = slice(m, m + len(game))
            if (self.reanalysed_step[rows] >= 0).any():
                game.reanalysis = (self.fresh_visits[rows].copy(), self.reanalysed_step[rows].copy())


# make_target's value target, for many (game, move index) pairs at once: the discounted
# root value td_steps ahead (or the cut game's final value, or 0 past an absorbing end)
# plus the discounted rewards until then. Shared by the batches and the initial priorities.
def n_step_values(
    flat: FlatGames,
    game_index: np.ndarray,
    index: np.ndarray,
    td_steps: int,
    discount: float,
    bootstrap_values: np.ndarray | None = None,
) -> np.ndarray:
    """The n-step value target of move `index` of game `game_index` (shapes broadcast together).

    Not masked past the end of a game: callers zero it there (absorbing states).

    Args:
      game_index: [B, 1] or [B] flat game indices.
      index: [B, K + 1] or [B] move indices, >= 0.
      bootstrap_values: Reanalyse: the value to bootstrap from at observation min(index + td_steps,
        length) (the target network's), shaped as `index`; replaces the stored root value,
        and a cut game's `bootstrap_value`. None: the stored ones.

    Returns:
      float64 values, the broadcast shape of game_index and index.
    """
    length = flat.length[game_index]
    start = flat.move_start[game_index]
    bootstrap = index + td_steps
    # Two players: each term with the sign of its player against the one to move at `index`
    # (Game.make_target); none with one player.
    signed = flat.final_player is not None
    if signed:
        player = flat.players[_row(start, length, index)]

        def sign(other_player):
            return np.where(other_player == player, 1.0, -1.0)

    # Past the end: 0 (absorbing), or for a game cut by a time limit its final value.
    cut = flat.has_bootstrap[game_index]
    last_value = flat.bootstrap_value[game_index] if bootstrap_values is None else bootstrap_values
    final = np.where(cut, last_value * discount ** np.maximum(length - index, 0), 0.0)
    root_value = flat.root_values[_row(start, length, bootstrap)] if bootstrap_values is None else bootstrap_values
    if signed:
        final = sign(flat.final_player[game_index]) * final
        root_value = sign(flat.players[_row(start, length, bootstrap)]) * root_value
    value = np.where(bootstrap < length, root_value * discount**td_steps, final)
    j = np.arange(td_steps)
    reward_index = index[..., None] + j  # [..., td]
    reward_rows = _row(start[..., None], length[..., None], reward_index)
    rewards = np.where(reward_index < length[..., None], flat.rewards[reward_rows], 0.0)
    if signed:
        rewards = np.where(flat.players[reward_rows] == player[..., None], rewards, -rewards)
    return value + (rewards * discount ** j.astype(np.float64)).sum(-1)


def _row(start: np.ndarray, length: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Flat row of move `index` of a game whose moves start at row `start`, clipped to the game."""
    return start + np.clip(index, 0, length - 1)


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


# The pseudocode's make_target for a whole batch: every index is computed for all B
# samples and K + 1 unroll steps at once, with masks where it runs past a game's end.
def make_batch_vectorized(
    flat: FlatGames,
    game_index: np.ndarray,
    positions: np.ndarray,
    padding: np.ndarray,
    num_unroll_steps: int,
    td_steps: int,
    discount: float,
    bootstrap_values: np.ndarray | None = None,
    fresh_rows: int = 0,
) -> Batch:
    """`make_batch` for (flat game index, position) pairs; same arrays, numpy-vectorised.

    Reanalyse: `bootstrap_values` ([B, K + 1], see `n_step_values`) replace the stored root
    values the value targets bootstrap from; the first `fresh_rows` rows take their policy
    targets from the reanalysed visits of each position that has some.
    """
    length = flat.length[game_index][:, None]  # [B, 1]
    start = flat.move_start[game_index][:, None]

    def at(index):  # row of a move index inside its game, clipped to the game
        return _row(start, length, index)

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
