"""The reference Monte-Carlo tree search, in plain Python, as in the pseudocode (revision 2).

One tree, one network call per simulation. It is the readable definition that any
faster search must reproduce exactly (same visit counts, same tie-breaking). The
network comes in only through `initial_inference` / `recurrent_inference`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from muzero.config import KnownBounds, MuZeroConfig
from muzero.networks.base import Network, NetworkOutput


class MinMaxStats:
    """Holds the min-max values of the tree, to normalise values into [0, 1].

    Why: values in Atari have arbitrary scale, while the prior term of the UCB
    formula is O(1); normalising by the range seen in this search puts them on par.
    """

    def __init__(self, known_bounds: KnownBounds | None, min_value_range: float = 0.0):
        self.maximum = known_bounds.max if known_bounds else -math.inf
        self.minimum = known_bounds.min if known_bounds else math.inf
        # Not in the pseudocode (0 there): `search.min_value_range`, EfficientZero's value_delta_max.
        self.min_value_range = min_value_range

    def update(self, value: float) -> None:
        self.maximum = max(self.maximum, value)
        self.minimum = min(self.minimum, value)

    def normalize(self, value: float) -> float:
        if self.maximum > self.minimum:
            # We normalize only when we have set the maximum and minimum values.
            return (value - self.minimum) / max(self.maximum - self.minimum, self.min_value_range)
        return value


class Node:
    """A search-tree node; `reward` is the reward predicted for the transition into it."""

    def __init__(self, prior: float):
        self.visit_count = 0
        self.to_play = -1
        self.prior = prior
        self.value_sum = 0.0
        self.children: dict[int, Node] = {}
        self.hidden_state = None
        self.reward = 0.0
        # The network's value at expansion (Gumbel MuZero's mixed value reads it; pUCT does not).
        self.raw_value = 0.0

    def expanded(self) -> bool:
        return len(self.children) > 0

    def value(self) -> float:
        if self.visit_count == 0:
            return 0.0
        return self.value_sum / self.visit_count


class ActionHistory:
    """Simple history container used inside the search: actions taken so far.

    Args:
      history: the game's actions up to the root.
      action_space_size: A.
      to_play: the player to move at the root.
      num_players: 1, or 2 for games where players alternate.
    """

    def __init__(self, history: Sequence[int], action_space_size: int, to_play: int = 0, num_players: int = 1):
        self.history = list(history)
        self.action_space_size = action_space_size
        self._root_to_play = to_play
        self._num_players = num_players
        self._root_length = len(self.history)

    def clone(self) -> ActionHistory:
        clone = ActionHistory(self.history, self.action_space_size, self._root_to_play, self._num_players)
        clone._root_length = self._root_length
        return clone

    def add_action(self, action: int) -> None:
        self.history.append(action)

    def last_action(self) -> int:
        return self.history[-1]

    def action_space(self) -> list[int]:
        return list(range(self.action_space_size))

    def to_play(self) -> int:
        """Player to move after the actions added since the root (players alternate)."""
        return (self._root_to_play + len(self.history) - self._root_length) % self._num_players


# Core Monte Carlo Tree Search algorithm.
# To decide on an action, we run N simulations, always starting at the root of
# the search tree and traversing the tree according to the UCB formula until we
# reach a leaf node.
def run_mcts(
    config: MuZeroConfig,
    root: Node,
    action_history: ActionHistory,
    network: Network,
    min_max_stats: MinMaxStats | None = None,
) -> MinMaxStats:
    """Runs `config.search.num_simulations` simulations from an expanded `root`.

    Returns:
      The search's MinMaxStats (a new one per search unless one is passed).
    """
    if min_max_stats is None:
        min_max_stats = MinMaxStats(config.search.known_bounds, config.search.min_value_range)
    if config.search.count_root_evaluation and root.visit_count == 0:
        # mctx's root: its network value is its first visit (search.count_root_evaluation).
        root.visit_count, root.value_sum = 1, root.raw_value

    for _ in range(config.search.num_simulations):
        history = action_history.clone()
        node = root
        search_path = [node]

        while node.expanded():
            action, node = select_child(config, node, min_max_stats)
            history.add_action(action)
            search_path.append(node)

        # Inside the search tree we use the dynamics function to obtain the next
        # hidden state given an action and the previous hidden state.
        parent = search_path[-2]
        network_output = network.recurrent_inference(parent.hidden_state[None], np.array([history.last_action()])).item(
            0
        )
        expand_node(node, history.to_play(), history.action_space(), network_output)

        backpropagate(
            search_path,
            network_output.value,
            history.to_play(),
            config.discount,
            min_max_stats,
            config.search.ucb_value,
            config.search.two_player_rule,
        )
    return min_max_stats


# Select the child with the highest UCB score. Exact ties go to the larger action,
# as Python's max over (score, action, child) tuples does in the pseudocode.
def select_child(config: MuZeroConfig, node: Node, min_max_stats: MinMaxStats) -> tuple[int, Node]:
    _, action, child = max(
        ((ucb_score(config, node, child, min_max_stats), action, child) for action, child in node.children.items()),
        key=lambda item: (item[0], item[1]),
    )
    return action, child


# The score for a node is based on its value, plus an exploration bonus based on
# the prior: pUCT (paper, Eq. 2).
def ucb_score(config: MuZeroConfig, parent: Node, child: Node, min_max_stats: MinMaxStats) -> float:
    search = config.search
    pb_c = math.log((parent.visit_count + search.pb_c_base + 1) / search.pb_c_base) + search.pb_c_init
    pb_c *= math.sqrt(parent.visit_count) / (child.visit_count + 1)

    prior_score = pb_c * child.prior
    if child.visit_count > 0:
        value = value_for_parent(config, parent.to_play, child)
        if search.ucb_value == "normalized_q":
            value_score = min_max_stats.normalize(child.reward + config.discount * value)
        else:
            value_score = child.reward + config.discount * min_max_stats.normalize(value)
    else:
        value_score = 0.0
    return prior_score + value_score


# Two players (search.two_player_rule: negamax): a node's value is from the point of view
# of the player to move at it; the player to move at its parent, when it is the other
# one, gains what that player loses. One player: the value as it is.
def value_for_parent(config: MuZeroConfig, parent_to_play: int, node: Node) -> float:
    """`node.value()` seen by the player to move at the node's parent."""
    if config.search.two_player_rule == "negamax" and node.to_play != parent_to_play:
        return -node.value()
    return node.value()


# We expand a node using the value, reward and policy prediction obtained from
# the neural network.
def expand_node(node: Node, to_play: int, actions: Sequence[int], network_output: NetworkOutput) -> None:
    node.to_play = to_play
    node.hidden_state = network_output.hidden_state
    node.reward = network_output.reward
    node.raw_value = network_output.value
    logits = np.asarray(network_output.policy_logits)
    legal = np.zeros(len(logits), bool)
    legal[list(actions)] = True
    priors = policy_priors(logits, legal)
    for action in actions:
        node.children[action] = Node(float(priors[action]))


def policy_priors(logits: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """Softmax of the policy logits over the legal actions; [..., A] -> [..., A], 0 where illegal.

    Shared by the reference and the batched search so both compute bit-identical priors:
    float64, max subtracted (changes nothing but overflow), and the normalising sum
    added up action by action in a fixed order.
    """
    logits = np.where(legal, np.asarray(logits, np.float64), -np.inf)
    exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
    total = exp[..., 0]
    for a in range(1, exp.shape[-1]):
        total = total + exp[..., a]
    return exp / total[..., None]


# At the end of a simulation, we propagate the evaluation all the way up the
# tree to the root, from the leaf (revision 2; revision 1 went root to leaf).
# `value` is from the point of view of `to_play`, the leaf's player. With two players
# (two_player_rule: negamax), a node's reward is its mover's (the player to move at its
# parent), so it enters `value` negated when the mover is the other player.
def backpropagate(
    search_path: list[Node],
    value: float,
    to_play: int,
    discount: float,
    min_max_stats: MinMaxStats,
    ucb_value: str = "pseudocode",
    two_player_rule: str = "pseudocode",
) -> None:
    negamax = two_player_rule == "negamax"
    for depth in range(len(search_path) - 1, -1, -1):
        node = search_path[depth]
        node.value_sum += value if node.to_play == to_play else -value
        node.visit_count += 1
        # The player to move at the parent (the root: its own player).
        mover = search_path[depth - 1].to_play if depth > 0 else node.to_play
        # What min-max statistics track: the value (or Q) as the parent's player uses it in ucb_score.
        node_value = -node.value() if negamax and node.to_play != mover else node.value()
        if ucb_value == "normalized_q":
            min_max_stats.update(node.reward + discount * node_value)
        else:
            min_max_stats.update(node_value)

        reward = -node.reward if negamax and mover != to_play else node.reward
        value = reward + discount * value


# At the start of each search, we add dirichlet noise to the prior of the root
# to encourage the search to explore new actions.
def add_exploration_noise(config: MuZeroConfig, node: Node, rng: np.random.Generator) -> None:
    actions = list(node.children.keys())
    noise = rng.dirichlet([config.search.root_dirichlet_alpha] * len(actions))
    frac = config.search.root_exploration_fraction
    for a, n in zip(actions, noise):
        node.children[a].prior = node.children[a].prior * (1 - frac) + n * frac


# Pick the move to play from the root's visit counts: sample with probability
# proportional to N^(1/T); T = 0 is the argmax (ties to the larger action).
def select_action(
    config: MuZeroConfig,
    num_moves: int,
    node: Node,
    training_steps: int,
    rng: np.random.Generator,
    temperature: float | None = None,
) -> int:
    if temperature is None:
        temperature = config.visit_softmax_temperature_fn(num_moves, training_steps)
    visit_counts = [(child.visit_count, action) for action, child in node.children.items()]
    return softmax_sample(visit_counts, temperature, rng)


def softmax_sample(visit_counts: list[tuple[int, int]], temperature: float, rng: np.random.Generator) -> int:
    """Samples an action from (visit_count, action) pairs with p ∝ N^(1/T)."""
    if temperature == 0:
        return max(visit_counts)[1]
    counts = np.array([count for count, _ in visit_counts], np.float64)
    actions = [action for _, action in visit_counts]
    # N^(1/T) computed in log space so small T does not overflow.
    logits = np.where(counts > 0, np.log(np.maximum(counts, 1e-300)) / temperature, -np.inf)
    if not np.isfinite(logits).any():
        return actions[int(rng.integers(len(actions)))]
    probabilities = np.exp(logits - logits.max())
    probabilities /= probabilities.sum()
    return actions[int(rng.choice(len(actions), p=probabilities))]
