"""Game symmetries: each sampled position seen under a random symmetry, each search from an image.

A board game's rules often do not change when the board is rotated or mirrored: a
tic-tac-toe position turned by 90 degrees has the same value, and its best moves are the
turned best moves. AlphaGo Zero trained on randomly rotated and reflected positions (its
paper, "Methods"); AlphaZero and MuZero did not. Here it is an option
(`replay.augment_symmetries`), off by default: each position of a batch is mapped by one of
the game's symmetries, drawn uniformly (the identity among them).

A symmetry is two permutations, of the flat observation and of the actions, and optionally a
sign for each element of the mapped observation: CartPole's mirror negates its four numbers
(cart position and velocity, pole angle and angular velocity) and swaps left and right. In
MuZero's unrolled training only the first observation, the K actions and the K + 1 policy
targets depend on the orientation; values and rewards do not change.

`search.random_symmetry` uses the same list at play time: `search_roots` searches each
position from its image under a symmetry drawn uniformly and maps the search's statistics back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from muzero.networks.base import Network
    from muzero.search.types import Searcher, SearchResult


class Symmetry(NamedTuple):
    """One symmetry of a game, as index permutations (tuples, so that specs stay hashable).

    Attributes:
      observation: [D]: the mapped observation is `observation[..., self.observation]`
        (a gather: element j of the new observation is element observation[j] of the old).
      action: [A]: action a becomes action[a].
      sign: [D] or (): element j of the mapped observation is multiplied by sign[j] after the
        gather (float observations only); () multiplies by nothing.
    """

    observation: tuple[int, ...]
    action: tuple[int, ...]
    sign: tuple[float, ...] = ()


def mirror_symmetries(size: int, actions: tuple[int, ...]) -> tuple[Symmetry, Symmetry]:
    """The identity and the mirror that negates a flat observation and maps the actions.

    Args:
      size: the observation's number of elements, each negated by the mirror.
      actions: action a becomes actions[a] (CartPole: (1, 0), left and right swapped).
    """
    order = tuple(range(size))
    return Symmetry(order, tuple(range(len(actions)))), Symmetry(order, tuple(actions), (-1.0,) * size)


def apply_symmetry(observations: np.ndarray, symmetry: Symmetry) -> np.ndarray:
    """[..., D] flat observations mapped by one symmetry: its gather, then its signs (if any)."""
    mapped = observations[..., list(symmetry.observation)]
    return mapped * np.asarray(symmetry.sign, mapped.dtype) if symmetry.sign else mapped


# Why search from an image: a learnt model need not keep the game's symmetries (CartPole's
# value of a state and of its mirror image drifted 13.70 apart on values of 16.67:
# docs/reanalyse.md); a search from a randomly drawn image at each move turns a bias toward
# one orientation into noise instead of a steady drift, as AlphaGo Zero's evaluations did.
def map_roots(
    choice: np.ndarray,
    symmetries: tuple[Symmetry, ...],
    observations: np.ndarray,
    legal: np.ndarray,
    noise: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """B search roots as their images: row b under symmetries[choice[b]].

    Args:
      choice: [B] indices into `symmetries`.
      observations: [B, D] flat observations.
      legal: [B, A] legal actions.
      noise: [B, A] root noise per action, or None.

    Returns:
      (observations [B, D], legal [B, A], noise [B, A] or None) of the images: old action a's
      entries move to action `symmetry.action[a]`.
    """
    gather, action_map, sign = symmetry_rows(symmetries, choice, observations.dtype)
    mapped = np.take_along_axis(np.asarray(observations), gather, axis=1)
    mapped = mapped if sign is None else mapped * sign
    rows = np.arange(len(choice))[:, None]

    def scatter(values: np.ndarray) -> np.ndarray:
        image = np.zeros_like(values)
        image[rows, action_map] = values
        return image

    return mapped, scatter(legal), None if noise is None else scatter(noise)


def unmap_result(result: SearchResult, choice: np.ndarray, symmetries: tuple[Symmetry, ...]) -> SearchResult:
    """A `SearchResult` of the images of `map_roots`, mapped back to the positions searched:
    action a's visits and policy are the image's at `symmetry.action[a]`, the chosen image
    action goes back through the inverse permutation, and the root values do not change."""
    action_map = symmetry_rows(symmetries, choice)[1]
    rows = np.arange(len(choice))[:, None]
    policy = None if result.policy is None else result.policy[rows, action_map]
    action = None
    if result.action is not None:  # the a with action_map[a] == the image's action: the inverse permutation
        action = np.argsort(action_map, axis=1)[rows[:, 0], np.asarray(result.action)]
    return result._replace(visit_counts=result.visit_counts[rows, action_map], policy=policy, action=action)


def search_roots(
    searcher: Searcher,
    network: Network,
    observations: np.ndarray,
    legal: np.ndarray,
    to_play: np.ndarray,
    noise: np.ndarray | None,
    symmetries: tuple[Symmetry, ...] = (),
    rng: np.random.Generator | None = None,
) -> SearchResult:
    """The batched search of B roots, [B, D] observations; with `symmetries`
    (`search.random_symmetry`), each root searched from its image under one drawn uniformly
    with `rng`, the statistics mapped back (`map_roots`, `unmap_result`)."""
    if not symmetries:
        return searcher(network.initial_inference(observations), network, legal, to_play, noise)
    if rng is None:
        raise ValueError("search_roots: drawing the roots' symmetries needs an rng")
    choice = rng.integers(len(symmetries), size=len(observations))
    observations, image_legal, noise = map_roots(choice, symmetries, observations, legal, noise)
    result = searcher(network.initial_inference(observations), network, image_legal, to_play, noise)
    return unmap_result(result, choice, symmetries)


def symmetry_rows(
    symmetries: tuple[Symmetry, ...], choice: np.ndarray, dtype: np.dtype | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Row b's maps under symmetries[choice[b]], as arrays: (gather [B, D], action map [B, A],
    signs [B, D] in `dtype`, or None when no symmetry has signs; a symmetry without signs
    multiplies by 1). The S permutations become arrays once, then a row per sample.

    Raises:
      ValueError: signs for observations that are not floats (`dtype`).
    """
    gather = np.asarray([s.observation for s in symmetries])[choice]
    action_map = np.asarray([s.action for s in symmetries])[choice]
    if dtype is None or not any(s.sign for s in symmetries):
        return gather, action_map, None
    if not np.issubdtype(dtype, np.floating):
        raise ValueError(f"symmetries with signs need float observations, not {dtype}")
    width = gather.shape[1]
    return gather, action_map, np.asarray([s.sign or (1.0,) * width for s in symmetries], dtype)[choice]


def grid_transforms(rows: int, cols: int, rotations: bool) -> list[np.ndarray]:
    """Permutations of the cells of a rows x cols grid (cell index r * cols + c).

    Each array p maps cell i to cell p[i]. With `rotations` (square grids only): the 8
    symmetries of the square (4 rotations, each with and without a mirror); without: the
    identity and the left-right mirror.
    """
    cells = np.arange(rows * cols).reshape(rows, cols)
    if not rotations:
        images = [cells, cells[:, ::-1]]
    else:
        if rows != cols:
            raise ValueError(f"rotations need a square grid, not {rows} x {cols}")
        images = [np.rot90(grid, k) for grid in (cells, cells.T) for k in range(4)]
    # images[t][r, c] is the old cell that lands on (r, c): invert into "old cell -> new cell".
    transforms = []
    for image in images:
        forward = np.empty(rows * cols, np.int64)
        forward[image.ravel()] = np.arange(rows * cols)
        transforms.append(forward)
    return transforms


def board_symmetries(
    planes: int, rows: int, cols: int, extra: int, actions: str, rotations: bool
) -> tuple[Symmetry, ...]:
    """Symmetries of a game whose observation is [planes, rows, cols] flattened, then `extra`
    elements that no symmetry moves (the player to move).

    Args:
      actions: "cells" (action = the cell played, r * cols + c: tic-tac-toe) or "columns"
        (action = the column, c: connect four).
      rotations: the 8 symmetries of the square; else the identity and the left-right mirror.
    """
    size = rows * cols
    symmetries = []
    for forward in grid_transforms(rows, cols, rotations):
        inverse = np.argsort(forward)
        # New plane p, cell d holds old plane p, cell inverse[d].
        gather = np.concatenate([p * size + inverse for p in range(planes)] + [planes * size + np.arange(extra)])
        if actions == "cells":
            action = forward
        elif actions == "columns":
            # A left-right mirror moves column c to cols - 1 - c; row 0's cells are columns.
            action = forward[:cols]
        else:
            raise ValueError(f"actions: 'cells' or 'columns', not {actions!r}")
        symmetries.append(Symmetry(tuple(int(i) for i in gather), tuple(int(a) for a in action)))
    return tuple(symmetries)


# Why augment at sampling time: each stored position then contributes every orientation
# over training without storing them, and replay, priorities and Reanalyse stay unchanged.
def augment_batch(batch, symmetries: tuple[Symmetry, ...], rng: np.random.Generator):
    """Maps each row of a `Batch` by a symmetry drawn uniformly from `symmetries`.

    Args:
      batch: `muzero.replay.Batch` with flat observations [B, D], actions [B, K],
        target_policy [B, K + 1, A], and unroll_observation [B, K, D] or None; value and
        reward targets and masks pass unchanged.

    Returns:
      the mapped batch (new arrays; the input is not modified).
    """
    choice = rng.integers(len(symmetries), size=len(batch.actions))
    observation = np.asarray(batch.observation)
    gather, action_map, sign = symmetry_rows(symmetries, choice, observation.dtype)
    observation = np.take_along_axis(observation, gather, axis=1)
    if sign is not None:
        observation = observation * sign
    actions = np.take_along_axis(action_map, np.asarray(batch.actions, np.int64), axis=1).astype(batch.actions.dtype)
    # The new policy puts old action a's probability on action_map[a].
    policy = np.zeros_like(batch.target_policy)
    rows = np.arange(len(choice))[:, None, None]
    steps = np.arange(policy.shape[1])[None, :, None]
    policy[rows, steps, action_map[:, None, :]] = batch.target_policy
    batch = batch._replace(observation=observation, actions=actions, target_policy=policy)
    if batch.unroll_observation is not None:  # the same symmetry along the whole unroll
        unrolled = np.take_along_axis(np.asarray(batch.unroll_observation), gather[:, None, :], axis=2)
        if sign is not None:
            unrolled = unrolled * sign[:, None, :]
        batch = batch._replace(unroll_observation=unrolled)
    return batch
