"""Gumbel MuZero's search (`muzero.search.gumbel`) compiled into one TensorFlow graph.

Why: self-play runs the search B games at a time inside one graph (`CompiledSearch`);
Gumbel MuZero changes only how a child is chosen and what the search returns, so it is
`CompiledSearch` with those two parts replaced: sequential halving at the root, the
improved-policy rule below it, and the selected action and policy target as outputs.
Expansion and backup are the pseudocode's, shared. The same float64 operations in the same
order as the reference give the same visit counts (tested in tests/test_compiled_gumbel.py).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import tensorflow as tf

from muzero.search.compiled import CompiledSearch, SearchTree, _at, _children_visits, _node_value
from muzero.search.gumbel import LOW_LOGIT, RESCALE_EPSILON, considered_visits_table
from muzero.search.types import SearchResult


class GumbelTree(NamedTuple):
    """`SearchTree`'s fields, then what Gumbel MuZero adds.

    Attributes:
      raw_value: [B, N] float64, the network's value at each node's expansion.
      gumbel: [B, A] float64, the roots' Gumbel noise (zeros in evaluation).
      root_logits: [B, A] float64, the roots' policy logits, -inf where illegal.
    """

    visit_count: tf.Tensor
    value_sum: tf.Tensor
    reward: tf.Tensor
    to_play: tf.Tensor
    expanded: tf.Tensor
    hidden: tf.Tensor
    children_index: tf.Tensor
    children_prior: tf.Tensor
    edge_exists: tf.Tensor
    num_nodes: tf.Tensor
    maximum: tf.Tensor
    minimum: tf.Tensor
    raw_value: tf.Tensor
    gumbel: tf.Tensor
    root_logits: tf.Tensor


def _sum_in_order(x: tf.Tensor) -> tf.Tensor:
    """[B, A] -> [B], added up action by action as the reference's Python loops do."""
    total = x[:, 0]
    for a in range(1, x.shape[-1]):
        total = total + x[:, a]
    return total


class CompiledGumbelSearch(CompiledSearch):
    """`run_gumbel_mcts` for B roots as one compiled TensorFlow function.

    Same arguments as `CompiledSearch`; `search.algorithm` is "gumbel". Called with the
    roots' Gumbel noise as `noise` (None: zeros, as in evaluation) and their network values
    as `root_value`; returns a `SearchResult` with the action to play and the policy target.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        table = considered_visits_table(self.search.max_considered_actions, self.search.num_simulations)
        self.considered_table = tf.constant(table, tf.int32)  # [m + 1, num_simulations]

    def _result(self, visits, value, action, policy) -> SearchResult:
        return SearchResult(visits.astype(np.int64), value, action.astype(np.int64), policy)

    def _root(self, rows, root_hidden, root_logits, root_reward, legal, noise, fraction, root_to_play, root_value):
        # No Dirichlet noise: the exploration is the Gumbel noise at the root.
        tree = super()._root(rows, root_hidden, root_logits, root_reward, legal, noise, 0.0, root_to_play, root_value)
        raw_value = tf.zeros_like(tree.value_sum)
        root = _at(rows, tf.zeros_like(rows))
        return GumbelTree(
            *tree,
            raw_value=tf.tensor_scatter_nd_update(raw_value, root, tf.cast(root_value, tf.float64)),
            gumbel=noise,
            root_logits=tf.where(legal, tf.cast(root_logits, tf.float64), tf.constant(-np.inf, tf.float64)),
        )

    def _expand(self, rows, tree, leaf, to_play, value, reward, logits, hidden):
        tree = super()._expand(rows, tree, leaf, to_play, value, reward, logits, hidden)
        return tree._replace(
            raw_value=tf.tensor_scatter_nd_update(tree.raw_value, _at(rows, leaf), tf.cast(value, tf.float64))
        )

    # At the root, sequential halving (`select_root_child`); below it, the improved-policy rule
    # (`select_interior_child`); both computed for every tree, the node picks.
    def _choose(self, rows, tree: SearchTree, node: tf.Tensor) -> tf.Tensor:
        sigma_q, visits = self._sigma_completed_q(rows, tree, node)
        legal = tree.edge_exists[:, 0]
        considered = tf.minimum(self.search.max_considered_actions, tf.reduce_sum(tf.cast(legal, tf.int32), 1))
        considered_visit = tf.gather_nd(self.considered_table, tf.stack([considered, tf.reduce_sum(visits, 1)], 1))
        root_score = self._score_considered(tree, considered_visit, sigma_q, visits)
        weights = tf.gather(tree.children_prior, node, batch_dims=1) * tf.exp(sigma_q)
        visits = tf.cast(visits, tf.float64)
        interior_score = weights / _sum_in_order(weights)[:, None] - visits / (1 + _sum_in_order(visits))[:, None]
        score = tf.where((node == 0)[:, None], root_score, interior_score)
        return tf.argmax(score, axis=1, output_type=tf.int32)

    # The move (the best g + logits + sigma(q) among the most visited) and the policy target
    # softmax(logits + sigma(q)) over the legal actions (`gumbel_decision`).
    def _outputs(self, rows, tree: SearchTree) -> tuple:
        root = tf.zeros_like(rows)
        sigma_q, visits = self._sigma_completed_q(rows, tree, root)
        score = self._score_considered(tree, tf.reduce_max(visits, 1), sigma_q, visits)
        z = tree.root_logits + sigma_q
        e = tf.exp(z - tf.reduce_max(z, axis=1, keepdims=True))
        return (
            visits,
            _node_value(tree.visit_count[:, 0], tree.value_sum[:, 0]),
            tf.argmax(score, axis=1, output_type=tf.int32),
            e / _sum_in_order(e)[:, None],
        )

    def _score_considered(self, tree, considered_visit, sigma_q, visits) -> tf.Tensor:
        """`score_considered` at the B roots: [B, A], -inf off the considered legal actions."""
        logits = tree.root_logits - tf.reduce_max(tree.root_logits, axis=1, keepdims=True)
        score = tf.maximum(tf.constant(LOW_LOGIT, tf.float64), tree.gumbel + logits + sigma_q)
        considered = tree.edge_exists[:, 0] & (visits == considered_visit[:, None])
        return tf.where(considered, score, tf.constant(-np.inf, tf.float64))

    # `sigma_completed_q` of the children of `node` [B]: Q where visited, the mixed value
    # elsewhere, min-max normalised over the A actions, scaled by (c_visit + max visits) * c_scale.
    def _sigma_completed_q(self, rows, tree, node) -> tuple[tf.Tensor, tf.Tensor]:
        """Returns (sigma(completed Q) [B, A] float64, the children's visit counts [B, A] int32)."""
        visits = _children_visits(rows, tree, node)
        children = tf.maximum(tf.gather(tree.children_index, node, batch_dims=1), 0)
        value = _node_value(visits, tf.gather(tree.value_sum, children, batch_dims=1))
        if self.negamax:  # `value_for_parent`
            other = (
                tf.gather(tree.to_play, children, batch_dims=1) != tf.gather_nd(tree.to_play, _at(rows, node))[:, None]
            )
            value = tf.where(other, -value, value)
        visited = visits > 0
        q = tf.where(visited, tf.gather(tree.reward, children, batch_dims=1) + self.discount * value, 0.0)
        # `mixed_value`
        prior = tf.maximum(tf.gather(tree.children_prior, node, batch_dims=1), np.finfo(np.float64).tiny)
        total_visits = _sum_in_order(tf.cast(visits, tf.float64))
        total_prior = _sum_in_order(tf.where(visited, prior, 0.0))
        weighted_q = _sum_in_order(tf.where(visited, prior * q / total_prior[:, None], 0.0))
        raw_value = tf.gather_nd(tree.raw_value, _at(rows, node))
        mixed = (raw_value + total_visits * weighted_q) / (total_visits + 1)
        completed = tf.where(visited, q, mixed[:, None])
        low = tf.reduce_min(completed, axis=1, keepdims=True)
        high = tf.reduce_max(completed, axis=1, keepdims=True)
        completed = (completed - low) / tf.maximum(high - low, max(RESCALE_EPSILON, self.search.min_value_range))
        max_visits = tf.cast(tf.reduce_max(visits, axis=1, keepdims=True), tf.float64)
        return (self.search.c_visit + max_visits) * self.search.c_scale * completed, visits
