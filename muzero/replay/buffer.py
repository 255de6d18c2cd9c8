"""`ReplayBuffer`: the newest `window_size` games, sampled into training batches."""

from __future__ import annotations

import collections
import functools
import threading
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from muzero.config import ReplayConfig
from muzero.game import Game
from muzero.replay.flat import FlatGames, draw_prioritized, priority, priority_probabilities
from muzero.replay.targets import Batch, make_batch_vectorized, unroll_observations
from muzero.symmetries import Symmetry, augment_batch


class Positions(NamedTuple):
    """Stored positions handed to a reanalyse search (`ReplayBuffer.positions_to_reanalyse`).

    Attributes:
      rows: [N] their rows in the replay buffer's flat copy (`FlatGames`).
      layout: the flat copy's layout they belong to (rows move when it is rebuilt).
      observation: [N, *image_shape] `make_image` of each position.
      legal: [N, A] bool, the legal actions there.
      to_play: [N] int, the player to move there.
    """

    rows: np.ndarray
    layout: int
    observation: np.ndarray
    legal: np.ndarray
    to_play: np.ndarray


class Sample(NamedTuple):
    """A training batch and where its positions live in replay (`ReplayBuffer.sample`), so that
    the priorities written back after the step land on its rows even when other batches were
    drawn meanwhile (`muzero.replay.prefetch`).

    Attributes:
      batch: the training batch.
      rows: [B] the positions' rows in the flat copy (`FlatGames`).
      layout: the flat copy's layout the rows belong to (rows move when it is rebuilt).
      reanalysed: Reanalyse: [round(fraction * B)] the reanalysed step of the policy target at
        k = 0 of the batch's first rows (-1: self-play's statistics); None when off.
    """

    batch: Batch
    rows: np.ndarray
    layout: int
    reanalysed: np.ndarray | None


def game_nbytes(game: Game) -> int:
    """Bytes of a stored game as `replay.max_bytes` and TensorBoard's replay/bytes count them:
    its observations, and its actions (int64), rewards and root values (float64) and visit
    distributions ([moves, A] float64) as arrays."""
    moves = len(game.history)
    nbytes = sum(np.asarray(observation).nbytes for observation in game.observations)
    return nbytes + 8 * (moves + len(game.rewards) + len(game.root_values)) + 8 * moves * game.action_space_size


def _locked(method: Callable) -> Callable:
    """Runs `method` holding the buffer's lock: the learner's prefetching thread samples while
    the main thread saves games, writes priorities and Reanalyse's results, or checkpoints."""

    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        with self.lock:
            return method(self, *args, **kwargs)

    return locked


class ReplayBuffer:
    """Keeps the newest `window_size` games; samples (game, position) pairs.

    Why a window of games: old games were played by old networks; the pseudocode
    forgets them by count of games, not of positions.

    Args:
      replay: the `replay` section (window, sampling, priorities, symmetry augmentation).
      rng: draws the samples, the padding actions and the symmetries (exact resume covers it).
      batch_size: B, positions per batch (`train.batch_size`).
      action_space_size: A.
      td_steps: n of the n-step value target of the initial priorities, the learner's
        (`muzero.factories.value_td_steps`); `sample_batch` takes its own.
      discount: the game's discount.
      reanalyse_fraction: `reanalyse.fraction`: the share of each batch whose policy targets
        come from reanalysed statistics; 0: Reanalyse off.
      num_unroll_steps: K (`train.num_unroll_steps`): Reanalyse also searches a segment's first
        K following moves again, which the unrolls of its last sampled moves take targets from.
      with_unroll_observations: batches carry the observations along the unroll
        (`train.consistency_loss_weight` > 0).
      symmetries: the game's symmetries, used when `replay.augment_symmetries` is on.
    """

    def __init__(
        self,
        replay: ReplayConfig,
        rng: np.random.Generator,
        *,
        batch_size: int,
        action_space_size: int,
        td_steps: int,
        discount: float,
        reanalyse_fraction: float = 0.0,
        num_unroll_steps: int = 0,
        with_unroll_observations: bool = False,
        symmetries: tuple[Symmetry, ...] = (),
    ):
        self.num_unroll_steps = num_unroll_steps
        self.window_size = replay.window_size
        self.max_bytes = replay.max_bytes
        self._sizes: collections.deque[int] = collections.deque()  # game_nbytes of each game in the window
        self.nbytes = 0
        self.batch_size = batch_size
        self.action_space_size = action_space_size
        self.sample_by = replay.sample_by
        self._window: collections.deque[Game] = collections.deque(maxlen=self.window_size)
        self.rng = rng
        self.games_saved = 0  # stored games and segments: the journal's index
        self.episodes_saved = 0  # games played to their end (with segments, their last segments)
        self.discount = discount
        self.td_steps = td_steps
        self.priority_alpha = replay.priority_alpha
        self.priority_beta = replay.priority_beta
        self.priority_epsilon = replay.priority_epsilon
        self.normalize_importance_weights = replay.normalize_importance_weights
        self.off_policy_correction_steps = replay.off_policy_correction_steps
        # Reanalyse (muzero/reanalyse.py): the flat copy keeps each position's reanalysed
        # statistics; `sample_batch` takes policy targets from them for the first
        # `reanalyse_fraction` of each batch, and value targets bootstrap through
        # `bootstrap_value_fn` (the target network) when it is set.
        self.reanalyse_fraction = reanalyse_fraction
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
        self.symmetries = tuple(symmetries) if replay.augment_symmetries else ()
        self.with_unroll_observations = with_unroll_observations
        self.lock = threading.RLock()

    @_locked
    def save_game(self, game: Game, training_step: int = 0) -> None:
        """Adds a finished game; `training_step`: the learner's step when it arrives (the age
        of its search statistics, for Reanalyse)."""
        game.saved_step = training_step
        if len(self._window) == self.window_size:
            self._drop_oldest()
        if self._flat is not None:
            self._flat.append(game)
        self._window.append(game)
        self._sizes.append(game_nbytes(game))
        self.nbytes += self._sizes[-1]
        self.games_saved += 1
        self.episodes_saved += not game.partial  # games, or the last segments of games
        # `replay.max_bytes`: the oldest games leave first; the newest stays, whatever its size.
        while self.max_bytes and self.nbytes > self.max_bytes and len(self._window) > 1:
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        self._window.popleft()
        self.nbytes -= self._sizes.popleft()
        if self._flat is not None:
            self._flat.drop_oldest()

    def __len__(self) -> int:
        return len(self._window)

    @property
    def games(self) -> tuple[Game, ...]:
        """The games in the window, oldest first (a snapshot: saving a game does not change it)."""
        return tuple(self._window)

    @_locked
    def state_dict(self) -> dict:
        """The buffer's contents as plain, picklable data (for checkpoints).

        Each game carries its positions' current priorities (`game.priorities`), so a
        resumed run samples exactly as the uninterrupted one.
        """
        if self._flat is not None:
            self._flat.store_priorities()
            self._flat.store_reanalysis()
        return {"games": list(self._window), "games_saved": self.games_saved, "episodes_saved": self.episodes_saved}

    @_locked
    def load_state_dict(self, state: dict) -> None:
        self._window = collections.deque(state["games"], maxlen=self.window_size)
        self._sizes = collections.deque(game_nbytes(game) for game in self._window)
        self.nbytes = sum(self._sizes)
        self.games_saved = state["games_saved"]
        self.episodes_saved = state.get("episodes_saved", self.games_saved)  # checkpoints before segments
        self._flat = None
        self.last_sampled = None

    def num_positions(self) -> int:
        return sum(game.positions() for game in self._window)

    def sample_batch(self, num_unroll_steps: int, td_steps: int) -> Batch:
        """Samples batch_size positions and their targets (pseudocode `sample_batch`); `sample`
        says how. The sampled rows are kept in `last_sampled` for `update_priorities`, and
        Reanalyse's steps of the policy targets in `last_reanalysed`."""
        sample = self.sample(num_unroll_steps, td_steps)
        self.last_sampled, self._sampled_layout = sample.rows, sample.layout
        if sample.reanalysed is not None:
            self.last_reanalysed = sample.reanalysed
        return sample.batch

    @_locked
    def sample(self, num_unroll_steps: int, td_steps: int) -> Sample:
        """Samples batch_size positions and their targets, with their rows in replay.

        Draws (game, position) pairs as `sample_game` / `sample_position` do, then builds
        the targets for the whole batch at once with `make_batch_vectorized`, which is
        tested equal to the per-position `make_batch` (the pseudocode's `make_target`).
        With `replay.priority_alpha` > 0 the positions are drawn by priority instead
        (`sample_prioritized`) and the batch carries their importance weights.

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
            count = len(self._window)
            if probabilities is None:
                game_index = self.rng.integers(count, size=self.batch_size)
            else:
                game_index = self.rng.choice(count, size=self.batch_size, p=probabilities)
            positions = np.floor(self.rng.random(self.batch_size) * flat.sampled[game_index]).astype(np.int64)
        sampled_rows = flat.move_start[game_index] + positions
        padding = self.rng.integers(self.action_space_size, size=(self.batch_size, num_unroll_steps))
        td_steps = self.value_horizons(flat, game_index, td_steps)  # [B, 1]
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
        reanalysed = flat.reanalysed_step[sampled_rows[:fresh_rows]] if fresh_rows else None
        if self.with_unroll_observations:
            observation, mask = unroll_observations(flat, game_index, positions, num_unroll_steps)
            batch = batch._replace(unroll_observation=observation, unroll_mask=mask)
        if self.symmetries:
            batch = augment_batch(batch, self.symmetries, self.rng)
        return Sample(batch._replace(importance_weight=importance_weight), sampled_rows, flat.layout, reanalysed)

    def value_horizons(self, flat: FlatGames, game_index: np.ndarray, td_steps: int) -> np.ndarray:
        """n of each sampled position's value target, [B, 1]: `td_steps`, less one step per
        `replay.off_policy_correction_steps` training steps by which its game arrived in replay
        before the newest game (at least 1)."""
        horizons = np.full((len(game_index), 1), td_steps, np.int64)
        if self.off_policy_correction_steps:
            age = flat.saved_step.max() - flat.saved_step[game_index][:, None]
            horizons = np.maximum(1, horizons - age // self.off_policy_correction_steps)
        return horizons

    # Reanalyse's choice: the positions whose statistics are the oldest, so that the whole
    # window is searched again and again by ever newer networks, the oldest game first.
    @_locked
    def positions_to_reanalyse(self, count: int, exclude: list[tuple[int, np.ndarray]] = ()) -> Positions | None:
        """The `count` positions in the window whose search statistics are the oldest (by the
        learner's step when they reached replay: the game's arrival when never reanalysed;
        ties: the oldest game first, then the earlier move); None when there are none.

        Args:
          exclude: (layout, rows) of positions out for reanalysis already (Ray calls in flight).
        """
        if len(self._window) == 0:
            return None
        flat = self._flat_games()
        game_index, positions, rows = flat.window(self.num_unroll_steps)
        searched = flat.search_step(rows, game_index)
        busy = [taken for layout, taken in exclude if layout == flat.layout]
        if busy:
            keep = ~np.isin(rows, np.concatenate(busy))
            game_index, positions, rows, searched = game_index[keep], positions[keep], rows[keep], searched[keep]
            if not len(rows):
                return None
        chosen = np.argsort(searched, kind="stable")[:count]
        game_index, positions, rows = game_index[chosen], positions[chosen], rows[chosen]
        legal = np.ones((len(rows), flat.action_space_size), bool)
        for i, (g, position) in enumerate(zip(game_index.tolist(), positions.tolist())):
            game = flat.game(g)
            if game.legal is not None:
                legal[i] = False
                legal[i, game.legal[position]] = True
        to_play = flat.players[rows] if flat.final_player is not None else np.zeros(len(rows), np.int64)
        return Positions(rows, flat.layout, flat.images(game_index, positions), legal, to_play)

    @_locked
    def store_reanalysis(self, rows: np.ndarray, layout: int, result, training_step: int) -> float:
        """Writes Reanalyse's search results for flat rows `rows` (of flat layout `layout`).

        Args:
          result: `SearchResult`: its policy target [N, A] is stored (the visit counts,
            normalised, when it has none).
          training_step: the learner's step when the results reach replay, the clock of
            `save_game` (in this process the searching network is the newest published one).

        Returns:
          the mean age, in training steps, of the statistics replaced (self-play's or an
          earlier reanalysis); NaN when the rows moved since they were chosen (nothing written).
        """
        flat = self._flat_games()
        if flat.layout != layout:
            return float("nan")
        game_index = np.searchsorted(flat.move_start, rows, side="right") - 1
        before = flat.search_step(rows, game_index)
        if result.policy is not None:  # Gumbel MuZero's improved policy
            flat.fresh_visits[rows] = result.policy
        else:
            visits = np.asarray(result.visit_counts, np.float64)
            flat.fresh_visits[rows] = visits / visits.sum(-1, keepdims=True)
        flat.reanalysed_step[rows] = training_step
        return float(np.mean(training_step - before))

    @_locked
    def fraction_reanalysed(self) -> float:
        """Share of the positions in the window that were reanalysed at least once."""
        flat = self._flat_games()
        rows = flat.window()[2]
        return float((flat.reanalysed_step[rows] >= 0).mean()) if len(rows) and flat.reanalyse else 0.0

    def _flat_games(self) -> FlatGames:
        if self._flat is None:
            self._flat = FlatGames(
                list(self._window),
                self.action_space_size,
                self.td_steps,
                self.discount,
                reanalyse=self.reanalyse_fraction > 0,
            )
        return self._flat

    def priority_probabilities(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """P(i) = (p_i + epsilon)^alpha / sum_j (p_j + epsilon)^alpha over the window
        (`muzero.replay.flat.priority_probabilities`).

        Returns:
          (probability, game_index, position), each [N] for the N positions in the window,
          game by game (oldest first), position by position.
        """
        return priority_probabilities(self._flat_games(), self.priority_alpha, self.priority_epsilon)

    def sample_prioritized(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """batch_size positions drawn with probability P(i), with their importance weights.

        Returns:
          (game_index, positions, importance_weight): [B] int64, [B] int64, [B] float32
          (1 / (N * P(i)))^beta, divided by the batch's largest with
          `replay.normalize_importance_weights`.
        """
        probability, game_index, positions = self.priority_probabilities()
        draws, importance_weight = draw_prioritized(
            probability, self.rng, self.batch_size, self.priority_beta, self.normalize_importance_weights
        )
        return game_index[draws], positions[draws], importance_weight

    def refresh_priorities(self, batch: Batch, initial_value: np.ndarray, sample: Sample | None = None) -> None:
        """After a training step on `batch`: priority |v - z| of its positions, v the value the
        network predicted at k = 0 ([B]), z the batch's scalar n-step value target.

        Args:
          sample: where the batch came from (`sample`); None: the last `sample_batch`.
        """
        self.update_priorities(priority(initial_value, batch.target_value[:, 0]), sample)

    @_locked
    def update_priorities(self, priorities: np.ndarray, sample: Sample | None = None) -> None:
        """Sets the priorities of the positions of a batch (after a training step).

        Args:
          priorities: [B] new |value - n-step value target| of the batch's positions.
          sample: the batch's `Sample`; None: the last `sample_batch`'s (`last_sampled`).
            Ignored when the flat copy was rebuilt since the batch was drawn (its rows moved).
        """
        rows, layout = (self.last_sampled, self._sampled_layout) if sample is None else (sample.rows, sample.layout)
        if rows is None or self._flat is None or self._flat.layout != layout:
            return
        self._flat.priorities[rows] = priorities

    @_locked
    def priority_mean(self) -> float:
        """Mean priority |value - target| over the positions in the window (for summaries)."""
        flat = self._flat_games()
        rows = flat.window()[2]
        return float(flat.priorities[rows].mean()) if len(rows) else 0.0

    def _game_probabilities(self) -> np.ndarray | None:
        if self.sample_by == "game":
            return None
        lengths = np.fromiter((g.positions() for g in self._window), np.float64, len(self._window))
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
            return self._window[int(self.rng.integers(len(self._window)))]
        return self._window[int(self.rng.choice(len(self._window), p=probabilities))]

    def sample_position(self, game: Game) -> int:
        """A position uniformly among the sampled moves of `game` (`Game.positions`)."""
        return int(self.rng.integers(game.positions()))
