"""Batched MCTS: B search trees as arrays, one batched network call per simulation.

Why: the reference `run_mcts` calls the network once per simulation for one game,
so self-play pays a network call's fixed cost (hundreds of microseconds for a
TensorFlow call) num_simulations times per move. Here B trees advance together:
every simulation selects one leaf in each tree with vectorised numpy, evaluates all
B leaves in one `recurrent_inference` call, and backs the values up in all trees.

It is the reference search, step for step, and is tested to give exactly the same
root visit counts: the same pUCT arithmetic in float64 in the same order (the log
and sqrt terms come from tables computed with Python's `math`, as the reference
does), the same priors (`policy_priors`), and the same tie-breaking (the larger
action wins an exact tie, like the pseudocode's `max` over (score, action, child)).

Tree layout ([B, M] per node, M = num_simulations + 1 nodes per tree; [B, M, A] per
edge): node 0 is the root; a child node is allocated when the search first descends
into it, which is also when it is expanded.
"""

from __future__ import annotations

import math

import numpy as np

from muzero.config import SearchConfig
from muzero.networks.base import Network, NetworkOutput
from muzero.search.gumbel import gumbel_search_roots
from muzero.search.reference import policy_priors
from muzero.search.types import SearchResult


class BatchedTree:
    """Arrays of B search trees with room for `num_nodes` nodes each."""

    def __init__(self, batch: int, num_nodes: int, num_actions: int, hidden_shape: tuple[int, ...]):
        self.visit_count = np.zeros((batch, num_nodes), np.int64)
        self.value_sum = np.zeros((batch, num_nodes), np.float64)
        self.reward = np.zeros((batch, num_nodes), np.float64)
        self.to_play = np.zeros((batch, num_nodes), np.int64)
        self.expanded = np.zeros((batch, num_nodes), bool)
        self.hidden_state = np.zeros((batch, num_nodes) + hidden_shape, np.float32)
        self.children_index = np.full((batch, num_nodes, num_actions), -1, np.int64)
        self.children_prior = np.zeros((batch, num_nodes, num_actions), np.float64)
        self.edge_exists = np.zeros((batch, num_nodes, num_actions), bool)
        self.num_nodes = np.ones(batch, np.int64)  # node 0, the root, exists

    def node_value(self, rows: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """`Node.value()`: value_sum / visit_count, 0 when unvisited."""
        visits = self.visit_count[rows, nodes]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(visits > 0, self.value_sum[rows, nodes] / visits, 0.0)


class BatchedMinMaxStats:
    """`MinMaxStats` for B trees at once."""

    def __init__(self, batch: int, known_bounds, min_value_range: float = 0.0):
        self.maximum = np.full(batch, known_bounds.max if known_bounds else -np.inf)
        self.minimum = np.full(batch, known_bounds.min if known_bounds else np.inf)
        self.min_value_range = min_value_range

    def update(self, value: np.ndarray, mask: np.ndarray) -> None:
        self.maximum = np.where(mask, np.maximum(self.maximum, value), self.maximum)
        self.minimum = np.where(mask, np.minimum(self.minimum, value), self.minimum)

    def normalize(self, value: np.ndarray) -> np.ndarray:
        """value [B, ...]: (value - min) / max(max - min, min_value_range) where max > min, else unchanged."""
        high, low = (
            self.maximum.reshape((-1,) + (1,) * (value.ndim - 1)),
            self.minimum.reshape((-1,) + (1,) * (value.ndim - 1)),
        )
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(high > low, (value - low) / np.maximum(high - low, self.min_value_range), value)


def run_batched_mcts(
    search: SearchConfig,
    discount: float,
    root_output: NetworkOutput,
    network: Network,
    legal: np.ndarray,
    root_to_play: np.ndarray | None = None,
    noise: np.ndarray | None = None,
    num_players: int = 1,
) -> SearchResult:
    """Searches B roots at once; the batched twin of expand_node + add_exploration_noise + run_mcts.

    Args:
      search: the `search` config section (num_simulations, pb_c_base/init, known_bounds, ucb_value).
      discount: gamma.
      root_output: initial_inference of the B root observations (numpy, batched).
      network: recurrent_inference on batches.
      legal: [B, A] bool, the legal actions at each root.
      root_to_play: [B] player to move at each root (default 0).
      noise: [B, A] Dirichlet samples over each root's legal actions (zeros elsewhere), or
        None for no exploration noise.
      num_players: 1, or 2 when players alternate.
    """
    legal = np.asarray(legal, bool)
    batch, num_actions = legal.shape
    rows = np.arange(batch)
    num_simulations = search.num_simulations
    hidden = np.asarray(root_output.hidden_state, np.float32)
    tree = BatchedTree(batch, num_simulations + 1, num_actions, hidden.shape[1:])
    stats = BatchedMinMaxStats(batch, search.known_bounds, search.min_value_range)
    root_to_play = np.zeros(batch, np.int64) if root_to_play is None else np.asarray(root_to_play, np.int64)

    # expand_node(root, ...) and add_exploration_noise(root).
    tree.expanded[:, 0] = True
    tree.hidden_state[:, 0] = hidden
    tree.reward[:, 0] = np.asarray(root_output.reward, np.float64)
    tree.to_play[:, 0] = root_to_play
    prior = policy_priors(root_output.policy_logits, legal)
    if noise is not None:
        frac = search.root_exploration_fraction
        prior = np.where(legal, prior * (1 - frac) + np.asarray(noise, np.float64) * frac, 0.0)
    tree.children_prior[:, 0] = prior
    tree.edge_exists[:, 0] = legal
    if search.count_root_evaluation:  # the root's network value is its first visit, as in mctx
        tree.visit_count[:, 0] = 1
        tree.value_sum[:, 0] = np.asarray(root_output.value, np.float64)

    # pUCT's log and sqrt terms by parent visit count, computed with Python's math as
    # the reference does, so both searches see identical floats. (Indexed up to
    # num_simulations + 1, every count the root reaches with search.count_root_evaluation.)
    log_term = np.array(
        [math.log((n + search.pb_c_base + 1) / search.pb_c_base) + search.pb_c_init for n in range(num_simulations + 2)]
    )
    sqrt_term = np.array([math.sqrt(n) for n in range(num_simulations + 2)])
    all_actions = np.ones(num_actions, bool)

    for _ in range(num_simulations):
        # Selection: descend every tree until an unexpanded node.
        node = np.zeros(batch, np.int64)
        path_nodes, path_actions = [node], []
        length = np.ones(batch, np.int64)
        active = tree.expanded[rows, node]
        while active.any():
            action = _select_child(search, discount, tree, stats, rows, node, log_term, sqrt_term)
            child = tree.children_index[rows, node, action]
            new = active & (child < 0)
            child = np.where(new, tree.num_nodes, child)
            tree.children_index[rows[new], node[new], action[new]] = child[new]
            tree.num_nodes += new
            node = np.where(active, child, node)
            length += active
            path_nodes.append(node)
            path_actions.append(action)
            active = active & tree.expanded[rows, node]
        path_nodes = np.stack(path_nodes, axis=1)  # [B, D + 1]
        path_actions = np.stack(path_actions, axis=1)  # [B, D]
        leaf = path_nodes[rows, length - 1]
        parent = path_nodes[rows, length - 2]
        last_action = path_actions[rows, length - 2]

        # One network call for all B leaves.
        output = network.recurrent_inference(tree.hidden_state[rows, parent], last_action)
        leaf_to_play = (root_to_play + length - 1) % num_players if num_players > 1 else root_to_play
        tree.expanded[rows, leaf] = True
        tree.to_play[rows, leaf] = leaf_to_play
        tree.hidden_state[rows, leaf] = np.asarray(output.hidden_state, np.float32)
        tree.reward[rows, leaf] = np.asarray(output.reward, np.float64)
        tree.children_prior[rows, leaf] = policy_priors(output.policy_logits, np.broadcast_to(all_actions, legal.shape))
        tree.edge_exists[rows, leaf] = True

        _backpropagate(
            search, discount, tree, stats, rows, path_nodes, length, np.asarray(output.value, np.float64), leaf_to_play
        )

    root_children = tree.children_index[:, 0]  # [B, A]
    visits = np.where(root_children >= 0, tree.visit_count[rows[:, None], np.maximum(root_children, 0)], 0)
    return SearchResult(visit_counts=visits, root_value=tree.node_value(rows, np.zeros(batch, np.int64)))


def _select_child(
    search: SearchConfig,
    discount: float,
    tree: BatchedTree,
    stats: BatchedMinMaxStats,
    rows: np.ndarray,
    node: np.ndarray,
    log_term: np.ndarray,
    sqrt_term: np.ndarray,
) -> np.ndarray:
    """`select_child` for B trees: the action with the highest `ucb_score`, ties to the larger action."""
    parent_visits = tree.visit_count[rows, node]
    children = tree.children_index[rows, node]  # [B, A], -1 where not yet allocated
    exists = children >= 0
    safe = np.maximum(children, 0)
    child_visits = np.where(exists, tree.visit_count[rows[:, None], safe], 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        child_value = np.where(child_visits > 0, tree.value_sum[rows[:, None], safe] / child_visits, 0.0)
    child_reward = tree.reward[rows[:, None], safe]
    if search.two_player_rule == "negamax":  # `value_for_parent`: the other player's value, negated
        child_value = np.where(
            tree.to_play[rows[:, None], safe] != tree.to_play[rows, node][:, None], -child_value, child_value
        )

    pb_c = log_term[parent_visits][:, None] * (sqrt_term[parent_visits][:, None] / (child_visits + 1))
    prior_score = pb_c * tree.children_prior[rows, node]
    if search.ucb_value == "normalized_q":
        value = stats.normalize(child_reward + discount * child_value)
    else:
        value = child_reward + discount * stats.normalize(child_value)
    score = prior_score + np.where(child_visits > 0, value, 0.0)
    score = np.where(tree.edge_exists[rows, node], score, -np.inf)
    num_actions = score.shape[1]
    return num_actions - 1 - np.argmax(score[:, ::-1], axis=1)


def _backpropagate(
    search: SearchConfig,
    discount: float,
    tree: BatchedTree,
    stats: BatchedMinMaxStats,
    rows: np.ndarray,
    path_nodes: np.ndarray,
    length: np.ndarray,
    value: np.ndarray,
    to_play: np.ndarray,
) -> None:
    """`backpropagate` for B trees, leaf to root along paths of different lengths."""
    for depth in range(path_nodes.shape[1] - 1, -1, -1):
        on_path = depth < length
        node = path_nodes[:, depth]
        r, n = rows[on_path], node[on_path]
        signed = np.where(tree.to_play[rows, node] == to_play, value, -value)
        tree.value_sum[r, n] += signed[on_path]
        tree.visit_count[r, n] += 1
        node_value = tree.node_value(rows, node)
        reward = tree.reward[rows, node]
        if search.two_player_rule == "negamax":
            # The player to move at the parent (the root: its own); see `backpropagate`.
            mover = tree.to_play[rows, path_nodes[:, depth - 1] if depth > 0 else node]
            node_value = np.where(tree.to_play[rows, node] != mover, -node_value, node_value)
            reward = np.where(mover != to_play, -reward, reward)
        if search.ucb_value == "normalized_q":
            stats.update(tree.reward[rows, node] + discount * node_value, on_path)
        else:
            stats.update(node_value, on_path)
        value = np.where(on_path, reward + discount * value, value)


class BatchedSearcher:
    """`run_batched_mcts` as a `Searcher`: numpy trees, the numpy network published for self-play.
    With `search.algorithm: gumbel`, the reference Gumbel search root by root (`gumbel_search_roots`).

    Args:
      search: the `search` config section.
      discount: gamma.
      num_players: 1, or 2 when players alternate.
    """

    def __init__(self, search: SearchConfig, discount: float, num_players: int = 1):
        self.search, self.discount, self.num_players = search, discount, num_players

    def bind(self, network: Network) -> Network:
        return network

    def __call__(
        self,
        root_output: NetworkOutput,
        network: Network,
        legal: np.ndarray,
        to_play: np.ndarray,
        noise: np.ndarray | None,
    ) -> SearchResult:
        if self.search.algorithm == "gumbel":  # the reference, root by root; `noise` is Gumbel's
            return gumbel_search_roots(
                self.search, self.discount, root_output, network, legal, to_play, noise, self.num_players
            )
        return run_batched_mcts(
            self.search, self.discount, root_output, network, legal, to_play, noise, self.num_players
        )
