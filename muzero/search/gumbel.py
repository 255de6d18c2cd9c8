"""Gumbel MuZero's search (Danihelka et al., ICLR 2022), in plain Python beside `run_mcts`.

pUCT's visit counts are a poor policy target when the budget is a handful of simulations:
most actions are never tried. Gumbel MuZero instead
* samples `max_considered_actions` actions at the root without replacement (Gumbel-top-k:
  the largest `g + logits`), and shares the budget among them by sequential halving, keeping
  the half with the best `g + logits + sigma(q)` after each round;
* completes the Q-values: an unvisited action takes the node's mixed value (the network's
  value averaged with the visited actions' Q, weighted by their priors);
* trains the policy towards softmax(logits + sigma(completed Q)), an improvement on the prior
  policy even with 2 simulations;
* below the root, picks the action whose visit share lags furthest behind that improved policy.

This is the readable definition the compiled search (`compiled_gumbel.py`) is tested equal
to, and it is tested equal to DeepMind's mctx (`mctx.gumbel_muzero_policy`) through stored
outputs (`scripts/mctx_gumbel_oracle.py`). Two departures from the pseudocode's search hold
here as in mctx: Q-values are min-max normalised per node (over the node's completed
Q-values, not the tree's `MinMaxStats`, so `search.known_bounds` is unused; the range divided
by is at least `search.min_value_range`, by default 0, which leaves mctx's epsilon), and exact
ties go to the smaller action (the first maximum).
"""

from __future__ import annotations

import math
import sys

import numpy as np

from muzero.config import GameConfig, MuZeroConfig, SearchConfig
from muzero.networks.base import Network, NetworkOutput
from muzero.search.reference import (
    ActionHistory,
    MinMaxStats,
    Node,
    backpropagate,
    expand_node,
    value_for_parent,
)
from muzero.search.types import SearchResult

# Scores below this are clipped, so that an action with a vanishing prior can still be
# visited when it is the only one left (mctx's `score_considered`).
LOW_LOGIT = -1e9
# Smallest denominator of the per-node min-max normalisation (mctx's epsilon).
RESCALE_EPSILON = 1e-8


# Sequential halving: the budget is spent in rounds; each round visits every action still
# considered equally often, then keeps the better half (never fewer than 2). Returned as, for
# each simulation, the visit count an action must have to be visited next.
def considered_visits(max_considered: int, num_simulations: int) -> list[int]:
    """The visit count an action needs to be chosen at simulation i, i < `num_simulations`.

    Example: 4 actions, 8 simulations: rounds of 8 // (2 * 4) = 1 visit each for 4 actions,
    then 8 // (2 * 2) = 2 for 2 actions: [0, 0, 0, 0, 1, 1, 2, 2].
    """
    if max_considered <= 1:
        return list(range(num_simulations))
    rounds = math.ceil(math.log2(max_considered))
    schedule: list[int] = []
    visits, considered = 0, max_considered
    while len(schedule) < num_simulations:
        for _ in range(max(1, num_simulations // (rounds * considered))):
            schedule += [visits] * considered
            visits += 1
        considered = max(2, considered // 2)
    return schedule[:num_simulations]


def considered_visits_table(max_considered: int, num_simulations: int) -> list[list[int]]:
    """`considered_visits(m, num_simulations)` for m = 0 .. max_considered: a root with fewer
    legal actions than `max_considered` considers them all."""
    return [considered_visits(m, num_simulations) for m in range(max_considered + 1)]


# A node's Q-values from its player's point of view, for every action (0 when unvisited).
def child_qvalues(config: MuZeroConfig, node: Node, num_actions: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns (visit counts [A], Q [A]): Q = reward + discount * value, as `ucb_score` sees it."""
    visits, qvalues = np.zeros(num_actions), np.zeros(num_actions)
    for action, child in node.children.items():
        visits[action] = child.visit_count
        if child.visit_count > 0:
            qvalues[action] = child.reward + config.discount * value_for_parent(config, node.to_play, child)
    return visits, qvalues


# The value that completes unvisited actions' Q (the paper's Appendix D): the network's value
# counted once, the visited actions' Q counted by the number of visits, averaged, the Q-values
# weighted by their share of the prior among the visited actions.
def mixed_value(raw_value: float, visits: np.ndarray, qvalues: np.ndarray, priors: np.ndarray) -> float:
    """Args: the node's network value; visits, Q and priors [A] of its actions."""
    priors = np.maximum(priors, sys.float_info.min)  # a visited action with prior 0 still counts
    total_visits, total_prior, weighted_q = 0.0, 0.0, 0.0
    for a in range(len(visits)):
        total_visits += visits[a]
        if visits[a] > 0:
            total_prior += priors[a]
    for a in range(len(visits)):
        if visits[a] > 0:
            weighted_q += priors[a] * qvalues[a] / total_prior
    return (raw_value + total_visits * weighted_q) / (total_visits + 1)


# sigma(completed Q): Q where visited, the mixed value elsewhere, min-max normalised over the
# node's actions (at the root, illegal actions hold the mixed value and take part, as in
# mctx; the range divided by is at least `search.min_value_range`, so that a node whose Qs
# differ by noise does not see them stretched over [0, 1]), then scaled by
# (c_visit + max visits) * c_scale, so that the Q-values weigh more against the logits as
# the search gathers evidence.
def sigma_completed_q(config: MuZeroConfig, node: Node, num_actions: int) -> np.ndarray:
    """sigma(completedQ) [A] of an expanded node's actions."""
    visits, qvalues = child_qvalues(config, node, num_actions)
    priors = np.zeros(num_actions)
    for action, child in node.children.items():
        priors[action] = child.prior
    completed = np.where(visits > 0, qvalues, mixed_value(node.raw_value, visits, qvalues, priors))
    low, high = completed.min(), completed.max()
    completed = (completed - low) / max(high - low, RESCALE_EPSILON, config.search.min_value_range)
    return (config.search.c_visit + visits.max()) * config.search.c_scale * completed


def score_considered(
    considered_visit: int,
    gumbel: np.ndarray,
    logits: np.ndarray,
    sigma_q: np.ndarray,
    visits: np.ndarray,
    legal: np.ndarray,
) -> np.ndarray:
    """g + logits + sigma(q) [A] for the legal actions with `considered_visit` visits, -inf
    elsewhere. `logits` are the root's, -inf where illegal."""
    logits = logits - logits[legal].max()
    score = np.maximum(LOW_LOGIT, gumbel + logits + sigma_q)
    return np.where(legal & (visits == considered_visit), score, -np.inf)


def improved_policy(logits: np.ndarray, sigma_q: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """softmax(logits + sigma(completed Q)) over the legal actions, 0 elsewhere: [A]."""
    z = np.where(legal, logits + sigma_q, -np.inf)
    e = np.exp(z - z.max())
    total = 0.0
    for a in range(len(e)):
        total += e[a]
    return e / total


# At the root: sequential halving among the Gumbel-top-k actions. Only actions with the
# schedule's visit count for this simulation may be chosen, the best g + logits + sigma(q)
# of those first; the first k simulations thus visit the top k of g + logits.
def select_root_child(
    config: MuZeroConfig, root: Node, root_logits: np.ndarray, gumbel: np.ndarray, table: list[list[int]]
) -> int:
    num_actions = len(root_logits)
    legal = np.isfinite(root_logits)
    visits, _ = child_qvalues(config, root, num_actions)
    considered = min(config.search.max_considered_actions, int(legal.sum()))
    considered_visit = table[considered][int(visits.sum())]
    score = score_considered(
        considered_visit, gumbel, root_logits, sigma_completed_q(config, root, num_actions), visits, legal
    )
    return int(np.argmax(score))


# Below the root, deterministically: the action whose share of the visits lags furthest
# behind the improved policy (the paper's Section 5), so visits follow that policy.
def select_interior_child(config: MuZeroConfig, node: Node, num_actions: int) -> int:
    visits, _ = child_qvalues(config, node, num_actions)
    priors = np.zeros(num_actions)
    for action, child in node.children.items():
        priors[action] = child.prior
    # softmax(logits + sigma(q)) as prior * exp(sigma(q)), normalised: the logits are the
    # priors' up to a constant.
    weights = priors * np.exp(sigma_completed_q(config, node, num_actions))
    total, total_visits = 0.0, 0.0
    for a in range(num_actions):
        total += weights[a]
        total_visits += visits[a]
    return int(np.argmax(weights / total - visits / (1 + total_visits)))


# Gumbel MuZero's search: `run_mcts` with the root chosen by sequential halving and the
# interior by the improved policy; expansion and backup are the pseudocode's.
def run_gumbel_mcts(
    config: MuZeroConfig,
    root: Node,
    action_history: ActionHistory,
    network: Network,
    root_logits: np.ndarray,
    gumbel: np.ndarray,
) -> tuple[int, np.ndarray]:
    """Runs `config.search.num_simulations` simulations from an expanded `root`.

    Args:
      root_logits: [A] the root's policy logits, -inf where illegal.
      gumbel: [A] Gumbel(0, 1) noise of self-play, zeros in evaluation.

    Returns:
      (the action to play, the policy target [A]).
    """
    num_actions = len(root_logits)
    table = considered_visits_table(config.search.max_considered_actions, config.search.num_simulations)
    min_max_stats = MinMaxStats(None)  # backpropagate keeps it; Gumbel normalises per node instead
    for _ in range(config.search.num_simulations):
        history = action_history.clone()
        node = root
        search_path = [node]
        while node.expanded():
            if node is root:
                action = select_root_child(config, root, root_logits, gumbel, table)
            else:
                action = select_interior_child(config, node, num_actions)
            node = node.children[action]
            history.add_action(action)
            search_path.append(node)

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
    return gumbel_decision(config, root, root_logits, gumbel)


# The move and the policy target after the search: the best g + logits + sigma(q) among the
# most visited actions (the survivors of the last halving), and softmax(logits + sigma(q)).
def gumbel_decision(
    config: MuZeroConfig, root: Node, root_logits: np.ndarray, gumbel: np.ndarray
) -> tuple[int, np.ndarray]:
    num_actions = len(root_logits)
    legal = np.isfinite(root_logits)
    visits, _ = child_qvalues(config, root, num_actions)
    sigma_q = sigma_completed_q(config, root, num_actions)
    action = int(np.argmax(score_considered(int(visits.max()), gumbel, root_logits, sigma_q, visits, legal)))
    return action, improved_policy(root_logits, sigma_q, legal)


def gumbel_search_roots(
    search: SearchConfig,
    discount: float,
    root_output: NetworkOutput,
    network: Network,
    legal: np.ndarray,
    to_play: np.ndarray,
    gumbel: np.ndarray | None,
    num_players: int = 1,
) -> SearchResult:
    """`run_gumbel_mcts` root by root, as a `Searcher` returns it (the numpy searcher's Gumbel
    MuZero: one network call per simulation and root, for small runs and tests).

    Args:
      root_output: `initial_inference` of the B roots.
      legal: [B, A] bool; to_play: [B].
      gumbel: [B, A] Gumbel noise, or None (evaluation: zeros).
    """
    batch, num_actions = legal.shape
    config = MuZeroConfig(game=GameConfig(action_space_size=num_actions, discount=discount), search=search)
    gumbel = np.zeros(legal.shape) if gumbel is None else gumbel
    visits, values = np.zeros((batch, num_actions), np.int64), np.zeros(batch)
    actions, policies = np.zeros(batch, np.int64), np.zeros((batch, num_actions))
    for i in range(batch):
        root = Node(0)
        expand_node(root, int(to_play[i]), list(np.flatnonzero(legal[i])), root_output.item(i))
        logits = np.where(legal[i], np.asarray(root_output.policy_logits[i], np.float64), -np.inf)
        history = ActionHistory([], num_actions, int(to_play[i]), num_players)
        actions[i], policies[i] = run_gumbel_mcts(config, root, history, network, logits, gumbel[i])
        values[i] = root.value()
        for action, child in root.children.items():
            visits[i, action] = child.visit_count
    return SearchResult(visits, values, actions, policies)
