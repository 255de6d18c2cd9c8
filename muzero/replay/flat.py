"""The replay window as flat arrays: n-step values, priorities and prioritized sampling.

`FlatGames` keeps every move of the window's games in one set of arrays, so that a batch's
targets (`muzero.replay.targets`), the positions' priorities and Reanalyse's statistics are
computed with numpy over all positions at once instead of game by game.
"""

from __future__ import annotations

import numpy as np

from muzero.game import Game


def priority(value: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Prioritized replay's priority of a position (paper appendix): |value - n-step value target|.

    `value` is the root search value when the game is saved, then the network's value
    at k = 0 when the position is trained on; [B] float64 out.
    """
    return np.abs(np.asarray(value, np.float64) - np.asarray(target, np.float64))


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
    visit distribution and the learner's step when it reached replay (-1: never reanalysed);
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
        # The moves sampled: all but a segment's following moves (kept for its targets only).
        self.sampled = np.array([game.positions() for game in self._games], np.int64)
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
        """The learner's step when each row's policy statistics reached replay (rows of the
        games `game_index`): its last reanalysis's, else the step its game entered replay."""
        return np.where(self.reanalysed_step[rows] >= 0, self.reanalysed_step[rows], self.saved_step[game_index])

    def game(self, index: int) -> Game:
        """The game at flat game index `index` (0: the oldest in the window)."""
        return self._games[index]

    def images(self, game_index: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """make_image(position) of each (game, position) pair, stacked: [B, *image_shape]."""
        return stack_images([self._games[g].make_image(i) for g, i in zip(game_index.tolist(), positions.tolist())])

    def window(self, following: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every sampled move of the window's games, game by game: (game index, position, row),
        each [N]; with `following`, also that many of a segment's following moves (Reanalyse:
        the unrolls of its sampled moves reach num_unroll_steps past them)."""
        count = np.minimum(self.length, self.sampled + following)
        game_index = np.repeat(np.arange(len(count)), count)
        first = np.cumsum(count) - count  # index of each game's first move in [0, N)
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
    td_steps: int | np.ndarray,
    discount: float,
    bootstrap_values: np.ndarray | None = None,
) -> np.ndarray:
    """The n-step value target of move `index` of game `game_index` (shapes broadcast together).

    Not masked past the end of a game: callers zero it there (absorbing states).

    Args:
      game_index: [B, 1] or [B] flat game indices.
      index: [B, K + 1] or [B] move indices, >= 0.
      td_steps: n, or each sample's n ([B, 1] or [B], as `game_index`; the off-policy correction).
      bootstrap_values: Reanalyse: the value to bootstrap from at observation min(index + td_steps,
        length) (the target network's), shaped as `index`; replaces the stored root value,
        and a cut game's `bootstrap_value`. None: the stored ones.

    Returns:
      float64 values, the broadcast shape of game_index and index.
    """
    length = flat.length[game_index]
    start = flat.move_start[game_index]
    td_steps = np.asarray(td_steps)
    bootstrap = index + td_steps
    # Two players: each term with the sign of its player against the one to move at `index`
    # (Game.make_target); none with one player.
    signed = flat.final_player is not None
    if signed:
        player = flat.players[move_row(start, length, index)]

        def sign(other_player):
            return np.where(other_player == player, 1.0, -1.0)

    # Past the end: 0 (absorbing), or for a game cut by a time limit its final value.
    cut = flat.has_bootstrap[game_index]
    last_value = flat.bootstrap_value[game_index] if bootstrap_values is None else bootstrap_values
    final = np.where(cut, last_value * discount ** np.maximum(length - index, 0), 0.0)
    root_value = flat.root_values[move_row(start, length, bootstrap)] if bootstrap_values is None else bootstrap_values
    if signed:
        final = sign(flat.final_player[game_index]) * final
        root_value = sign(flat.players[move_row(start, length, bootstrap)]) * root_value
    value = np.where(bootstrap < length, root_value * discount**td_steps, final)
    j = np.arange(td_steps.max())
    reward_index = index[..., None] + j  # [..., td]
    reward_rows = move_row(start[..., None], length[..., None], reward_index)
    counted = (reward_index < length[..., None]) & (j < td_steps[..., None])
    rewards = np.where(counted, flat.rewards[reward_rows], 0.0)
    if signed:
        rewards = np.where(flat.players[reward_rows] == player[..., None], rewards, -rewards)
    return value + (rewards * discount ** j.astype(np.float64)).sum(-1)


def move_row(start: np.ndarray, length: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Flat row of move `index` of a game whose moves start at row `start`, clipped to the game."""
    return start + np.clip(index, 0, length - 1)


# Why (paper appendix, after Schaul et al. 2016, "Prioritized Experience Replay"):
# positions whose value the network still predicts badly are drawn more often, and
# each sample's loss is scaled by (1 / (N * P(i)))^beta, which with beta = 1 makes the
# expected weighted loss the loss under uniform sampling again. Computed over the
# whole window with numpy for every batch: O(N) (a sum tree would draw in O(log N)).
def priority_probabilities(flat: FlatGames, alpha: float, epsilon: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P(i) = (p_i + epsilon)^alpha / sum_j (p_j + epsilon)^alpha over the window.

    Returns:
      (probability, game_index, position), each [N] for the N positions in the window,
      game by game (oldest first), position by position.
    """
    game_index, positions, rows = flat.window()
    scaled = (flat.priorities[rows] + epsilon) ** alpha
    total = scaled.sum()
    if not total > 0:  # every priority 0 with epsilon 0: nothing to prefer
        scaled, total = np.ones_like(scaled), float(len(scaled))
    return scaled / total, game_index, positions


def draw_prioritized(
    probability: np.ndarray, rng: np.random.Generator, batch_size: int, beta: float, normalize: bool
) -> tuple[np.ndarray, np.ndarray]:
    """`batch_size` indices drawn with probability P(i), with their importance weights.

    Args:
      probability: [N] P(i), from `priority_probabilities`.
      normalize: divide the weights by the batch's largest (`replay.normalize_importance_weights`).

    Returns:
      (draws, importance_weight): [B] int64 indices into `probability`, [B] float32
      (1 / (N * P(i)))^beta.
    """
    cumulative = np.cumsum(probability)
    draws = np.searchsorted(cumulative, rng.random(batch_size) * cumulative[-1], side="right")
    draws = np.minimum(draws, len(probability) - 1)  # u * total rounded up to the total
    importance_weight = (1.0 / (len(probability) * probability[draws])) ** beta
    if normalize:
        importance_weight = importance_weight / importance_weight.max()
    return draws, importance_weight.astype(np.float32)
