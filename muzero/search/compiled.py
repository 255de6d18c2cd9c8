"""The batched search compiled into one TensorFlow graph (optionally XLA).

Why: `run_batched_mcts` pays numpy's per-operation cost (microseconds) for every
small array operation of every simulation; at B = 256 that, not arithmetic, is
most of its time. Here the same algorithm (same arrays, same order of float64
operations, same tie-breaking) runs as nested `tf.while_loop`s inside one
`tf.function`, so a whole move's search for B games is one call, and with XLA the
loops compile to native code, as mctx does with JAX.

The loops carry named state: `SearchTree` (the B trees, as `BatchedTree`'s arrays) through
the simulations, `Descent` (where each tree's selection is) through a selection. The
network comes in as a TensorFlow callable, `recurrent(hidden [B, ...], action [B]) ->
(value [B], reward [B], policy_logits [B, A], hidden [B, ...])`; the learner's Keras models
are read inside the graph, so new weights need no retracing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from muzero.config import SearchConfig
from muzero.search.types import RecurrentFn, SearchResult


class SearchTree(NamedTuple):
    """B search trees of N = num_simulations + 1 nodes as arrays (`BatchedTree`'s layout):
    node 0 is the root; a child gets the next free node when selection first takes its edge.

    Attributes:
      visit_count: [B, N] int32.
      value_sum: [B, N] float64.
      reward: [B, N] float64, the reward of the transition into the node.
      to_play: [B, N] int32.
      expanded: [B, N] bool.
      hidden: [B, N, *hidden_shape] float32.
      children_index: [B, N, A] int32, the child's node, -1 while it has none.
      children_prior: [B, N, A] float64.
      edge_exists: [B, N, A] bool: the root's legal actions, every action below it.
      num_nodes: [B] int32, nodes in use.
      maximum: [B] float64, `MinMaxStats.maximum`.
      minimum: [B] float64, `MinMaxStats.minimum`.
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


class Descent(NamedTuple):
    """The selection loop's state: one simulation's descent in B trees at once, the path it
    took, and the trees' children, to which it adds the leaves it reaches.

    Attributes:
      node: [B] the node each tree's selection is at.
      active: [B] bool, still descending (the node is expanded).
      depth: [] int32, steps taken.
      path: [B, N + 1] int32, the path's nodes, the root first.
      actions: [B, N] int32, the actions between them.
      length: [B] int32, nodes on each path.
      children_index: [B, N, A] int32, `SearchTree.children_index` with the new leaves.
      num_nodes: [B] int32, `SearchTree.num_nodes` with the new leaves.
    """

    node: tf.Tensor
    active: tf.Tensor
    depth: tf.Tensor
    path: tf.Tensor
    actions: tf.Tensor
    length: tf.Tensor
    children_index: tf.Tensor
    num_nodes: tf.Tensor


class Backup(NamedTuple):
    """The backup loop's state: where it is on the B paths, the value it carries, and the
    statistics it writes (`SearchTree`'s fields of the same names).

    Attributes:
      depth: [] int32, the position on the paths being updated, counting down to the root.
      value: [B] float64, the discounted return backed up into that node.
      visit_count: [B, N] int32.
      value_sum: [B, N] float64.
      maximum: [B] float64.
      minimum: [B] float64.
    """

    depth: tf.Tensor
    value: tf.Tensor
    visit_count: tf.Tensor
    value_sum: tf.Tensor
    maximum: tf.Tensor
    minimum: tf.Tensor


def _while(cond: Callable, body: Callable, state: NamedTuple) -> NamedTuple:
    """`tf.while_loop` over one NamedTuple: body(state) -> state while cond(state).

    A loop carries only the fields it writes (in graph mode every loop variable costs
    operations per iteration); the others it reads from its closure."""
    (state,) = tf.while_loop(cond, lambda state: (body(state),), (state,))
    return state


def _policy_priors(logits: tf.Tensor, legal: tf.Tensor) -> tf.Tensor:
    """`search.policy_priors` in TensorFlow: float64, max subtracted, sum in action order."""
    logits = tf.where(legal, tf.cast(logits, tf.float64), tf.constant(-np.inf, tf.float64))
    exp = tf.exp(logits - tf.reduce_max(logits, axis=-1, keepdims=True))
    total = exp[..., 0]
    for a in range(1, exp.shape[-1]):
        total = total + exp[..., a]
    return exp / total[..., None]


def _at(rows: tf.Tensor, node: tf.Tensor) -> tf.Tensor:
    """[B] nodes -> [B, 2] indices (row, node) into a [B, N, ...] array."""
    return tf.stack([rows, node], axis=1)


def _normalize(value: tf.Tensor, high: tf.Tensor, low: tf.Tensor, min_value_range: float = 0.0) -> tf.Tensor:
    """`MinMaxStats.normalize` of value [B, ...] by B trees' bounds high, low [B] (dividing by at least
    `min_value_range`)."""
    high, low = high[:, None], low[:, None]
    span = tf.maximum(high - low, tf.constant(min_value_range, tf.float64))
    return tf.where(high > low, (value - low) / tf.where(high > low, span, 1.0), value)


def _node_value(visits: tf.Tensor, sums: tf.Tensor) -> tf.Tensor:
    """`Node.value()`: value_sum / visit_count, 0 when unvisited."""
    return tf.where(visits > 0, sums / tf.cast(tf.maximum(visits, 1), tf.float64), 0.0)


def _children_visits(rows: tf.Tensor, tree, node: tf.Tensor) -> tf.Tensor:
    """The visit counts [B, A] of the children of `node` [B] (0 where there is no child)."""
    children = tf.gather(tree.children_index, node, batch_dims=1)
    return tf.where(children >= 0, tf.gather(tree.visit_count, tf.maximum(children, 0), batch_dims=1), 0)


class CompiledSearch:
    """`run_batched_mcts` as one compiled TensorFlow function.

    Args:
      search: the `search` config section; num_simulations and the action count fix the graph.
      discount: gamma.
      num_actions: A.
      recurrent: the network's recurrent inference as TensorFlow ops.
      hidden_shape: shape of one hidden state.
      jit_compile: compile with XLA.
      num_players: 1, or 2 when players alternate.
    """

    def __init__(
        self,
        search: SearchConfig,
        discount: float,
        num_actions: int,
        recurrent: RecurrentFn,
        hidden_shape: tuple[int, ...],
        jit_compile: bool = True,
        num_players: int = 1,
    ):
        self.search = search
        self.discount = discount
        self.recurrent = recurrent
        self.num_players = num_players
        self.num_actions = num_actions
        self.hidden_shape = tuple(hidden_shape)
        self.negamax = search.two_player_rule == "negamax" and num_players > 1
        # search.count_root_evaluation (pUCT only): the root's network value is its first visit, as in mctx.
        self.count_root = search.count_root_evaluation and search.algorithm == "puct"
        n = search.num_simulations
        # pUCT's log and sqrt terms by parent visit count, from Python's math as the reference
        # (indexed up to n + 1, every count the root reaches with search.count_root_evaluation).
        self.log_term = tf.constant(
            [math.log((v + search.pb_c_base + 1) / search.pb_c_base) + search.pb_c_init for v in range(n + 2)],
            tf.float64,
        )
        self.sqrt_term = tf.constant([math.sqrt(v) for v in range(n + 2)], tf.float64)
        a = self.num_actions
        self._search = tf.function(
            self._run,
            jit_compile=jit_compile,
            input_signature=[
                tf.TensorSpec([None, *self.hidden_shape], tf.float32),  # root hidden state
                tf.TensorSpec([None, a], tf.float32),  # root policy logits
                tf.TensorSpec([None], tf.float32),  # root reward
                tf.TensorSpec([None, a], tf.bool),  # legal actions
                tf.TensorSpec([None, a], tf.float64),  # Dirichlet noise (zeros: none)
                tf.TensorSpec([], tf.float64),  # exploration fraction (0: none)
                tf.TensorSpec([None], tf.int32),  # root to_play
                tf.TensorSpec([None], tf.float32),  # root value (Gumbel's mixed value reads it)
            ],
        )

    def __call__(
        self, root_hidden, root_logits, root_reward, legal, root_to_play=None, noise=None, root_value=None
    ) -> SearchResult:
        """Searches B roots.

        Args:
          root_hidden: [B, *hidden_shape] the roots' hidden states.
          root_logits: [B, A] their policy logits.
          root_reward: [B] their rewards.
          legal: [B, A] bool, the legal actions at each root.
          root_to_play: [B] the player to move at each root (None: player 0).
          noise: [B, A] Dirichlet samples mixed into the roots' priors (None: no noise).
          root_value: [B] the roots' network values (None: zeros). Gumbel's mixed value reads
            them, and pUCT with `search.count_root_evaluation`, which requires them.
        """
        if root_value is None and self.count_root:
            raise ValueError("search.count_root_evaluation: the compiled search needs the roots' values")
        legal = np.asarray(legal, bool)
        batch = len(legal)
        fraction = self.search.root_exploration_fraction if noise is not None else 0.0
        noise = np.zeros(legal.shape) if noise is None else np.asarray(noise, np.float64)
        to_play = np.zeros(batch, np.int32) if root_to_play is None else np.asarray(root_to_play, np.int32)
        root_value = np.zeros(batch, np.float32) if root_value is None else np.asarray(root_value, np.float32)
        outputs = self._search(
            np.asarray(root_hidden, np.float32),
            np.asarray(root_logits, np.float32),
            np.asarray(root_reward, np.float32),
            legal,
            noise,
            np.float64(fraction),
            to_play,
            root_value,
        )
        return self._result(*(x.numpy() for x in outputs))

    def _result(self, visits: np.ndarray, value: np.ndarray) -> SearchResult:
        """The graph's outputs as a `SearchResult`."""
        return SearchResult(visit_counts=visits.astype(np.int64), root_value=value)

    # `run_mcts` for B trees: each simulation selects a leaf in every tree, evaluates all B
    # leaves in one network call, expands them and backs their values up.
    def _run(self, root_hidden, root_logits, root_reward, legal, noise, fraction, root_to_play, root_value):
        rows = tf.range(tf.shape(legal)[0])
        tree = self._root(rows, root_hidden, root_logits, root_reward, legal, noise, fraction, root_to_play, root_value)

        def simulation(i, tree):
            descent, tree = self._select(rows, tree)
            leaf = tf.gather(descent.path, descent.length - 1, batch_dims=1)
            parent = tf.gather(descent.path, descent.length - 2, batch_dims=1)
            last_action = tf.gather(descent.actions, descent.length - 2, batch_dims=1)
            # One network call for all B leaves.
            value, reward, logits, hidden = self.recurrent(tf.gather_nd(tree.hidden, _at(rows, parent)), last_action)
            if self.num_players > 1:
                leaf_to_play = (root_to_play + descent.length - 1) % self.num_players
            else:
                leaf_to_play = root_to_play
            tree = self._expand(rows, tree, leaf, leaf_to_play, value, reward, logits, hidden)
            return i + 1, self._backpropagate(rows, tree, descent, tf.cast(value, tf.float64), leaf_to_play)

        _, tree = tf.while_loop(lambda i, _: i < self.search.num_simulations, simulation, (tf.constant(0), tree))
        return self._outputs(rows, tree)

    def _outputs(self, rows, tree: SearchTree) -> tuple:
        """What the graph returns: the roots' visit counts [B, A] and values [B]."""
        return _children_visits(rows, tree, tf.zeros_like(rows)), _node_value(
            tree.visit_count[:, 0], tree.value_sum[:, 0]
        )

    # The pseudocode's root: `expand_node` + `add_exploration_noise`, in trees with no other node.
    def _root(
        self, rows, root_hidden, root_logits, root_reward, legal, noise, fraction, root_to_play, root_value
    ) -> SearchTree:
        batch, nodes, a = tf.shape(rows)[0], self.search.num_simulations + 1, self.num_actions
        root = _at(rows, tf.zeros([batch], tf.int32))
        prior = _policy_priors(root_logits, legal)
        prior = tf.where(legal, prior * (1 - fraction) + noise * fraction, tf.constant(0.0, tf.float64))
        zeros = tf.zeros([batch, nodes], tf.float64)
        hidden = tf.zeros(tf.concat([[batch, nodes], self.hidden_shape], 0), tf.float32)
        bounds = self.search.known_bounds
        counted = float(self.count_root)
        return SearchTree(
            visit_count=tf.tensor_scatter_nd_update(
                tf.zeros([batch, nodes], tf.int32), root, tf.fill([batch], tf.cast(counted, tf.int32))
            ),
            value_sum=tf.tensor_scatter_nd_update(zeros, root, counted * tf.cast(root_value, tf.float64)),
            reward=tf.tensor_scatter_nd_update(zeros, root, tf.cast(root_reward, tf.float64)),
            to_play=tf.tensor_scatter_nd_update(tf.zeros([batch, nodes], tf.int32), root, root_to_play),
            expanded=tf.one_hot(tf.zeros([batch], tf.int32), nodes) > 0,
            hidden=tf.tensor_scatter_nd_update(hidden, root, root_hidden),
            children_index=tf.fill([batch, nodes, a], -1),
            children_prior=tf.tensor_scatter_nd_update(tf.zeros([batch, nodes, a], tf.float64), root, prior),
            edge_exists=tf.tensor_scatter_nd_update(tf.zeros([batch, nodes, a], tf.bool), root, legal),
            num_nodes=tf.ones([batch], tf.int32),
            maximum=tf.fill([batch], tf.constant(bounds.max if bounds else -np.inf, tf.float64)),
            minimum=tf.fill([batch], tf.constant(bounds.min if bounds else np.inf, tf.float64)),
        )

    # `select_child` from the root down, in every tree, until an unexpanded node: each step
    # takes the child `_choose` picks (pUCT: the best `ucb_score`, the larger action on a tie,
    # as the pseudocode's max), and gives a child it takes for the first time the next free node.
    def _select(self, rows, tree: SearchTree) -> tuple[Descent, SearchTree]:
        batch, max_depth = tf.shape(rows)[0], self.search.num_simulations + 1

        def select_step(descent: Descent) -> Descent:
            node, active, depth = descent.node, descent.active, descent.depth
            action = self._choose(rows, tree._replace(children_index=descent.children_index), node)
            edge = tf.stack([rows, node, action], axis=1)
            child = tf.gather_nd(descent.children_index, edge)
            new = active & (child < 0)
            child = tf.where(new, descent.num_nodes, child)
            node = tf.where(active, child, node)
            return Descent(
                node=node,
                active=active & tf.gather_nd(tree.expanded, _at(rows, node)),
                depth=depth + 1,
                path=tf.tensor_scatter_nd_update(descent.path, _at(rows, tf.fill([batch], depth + 1)), node),
                actions=tf.tensor_scatter_nd_update(descent.actions, _at(rows, tf.fill([batch], depth)), action),
                length=descent.length + tf.cast(active, tf.int32),
                children_index=tf.tensor_scatter_nd_update(descent.children_index, edge, child),
                num_nodes=descent.num_nodes + tf.cast(new, tf.int32),
            )

        start = tf.zeros([batch], tf.int32)
        descent = Descent(
            node=start,
            active=tf.gather_nd(tree.expanded, _at(rows, start)),
            depth=tf.constant(0),
            path=tf.zeros([batch, max_depth + 1], tf.int32),
            actions=tf.zeros([batch, max_depth], tf.int32),
            length=tf.ones([batch], tf.int32),
            children_index=tree.children_index,
            num_nodes=tree.num_nodes,
        )
        descent = _while(lambda descent: tf.reduce_any(descent.active), select_step, descent)
        return descent, tree._replace(children_index=descent.children_index, num_nodes=descent.num_nodes)

    # `select_child`'s choice at `node` [B]: the best `ucb_score`, the larger action on a tie.
    def _choose(self, rows, tree: SearchTree, node: tf.Tensor) -> tf.Tensor:
        score = self._ucb_scores(rows, tree, node)
        return self.num_actions - 1 - tf.argmax(tf.reverse(score, [1]), axis=1, output_type=tf.int32)

    # The pseudocode's `ucb_score` of every child of `node` [B]: [B, A], -inf off the edges.
    def _ucb_scores(self, rows, tree: SearchTree, node: tf.Tensor) -> tf.Tensor:
        discount = tf.constant(self.discount, tf.float64)
        parent_visits = tf.gather_nd(tree.visit_count, _at(rows, node))
        children = tf.gather(tree.children_index, node, batch_dims=1)  # [B, A]
        safe = tf.maximum(children, 0)
        child_visits = tf.where(children >= 0, tf.gather(tree.visit_count, safe, batch_dims=1), 0)
        child_value = _node_value(child_visits, tf.gather(tree.value_sum, safe, batch_dims=1))
        child_reward = tf.gather(tree.reward, safe, batch_dims=1)
        if self.negamax:  # `value_for_parent`: the other player's value, negated
            other = tf.gather(tree.to_play, safe, batch_dims=1) != tf.gather_nd(tree.to_play, _at(rows, node))[:, None]
            child_value = tf.where(other, -child_value, child_value)
        pb_c = tf.gather(self.log_term, parent_visits)[:, None] * (
            tf.gather(self.sqrt_term, parent_visits)[:, None] / tf.cast(child_visits + 1, tf.float64)
        )
        prior_score = pb_c * tf.gather(tree.children_prior, node, batch_dims=1)
        if self.search.ucb_value == "normalized_q":
            value = _normalize(
                child_reward + discount * child_value, tree.maximum, tree.minimum, self.search.min_value_range
            )
        else:
            value = child_reward + discount * _normalize(
                child_value, tree.maximum, tree.minimum, self.search.min_value_range
            )
        score = prior_score + tf.where(child_visits > 0, value, 0.0)
        return tf.where(tf.gather(tree.edge_exists, node, batch_dims=1), score, tf.constant(-np.inf, tf.float64))

    # The pseudocode's `expand_node` for B leaves: their player, hidden state, reward and the
    # priors of all A actions (every action is legal below the root).
    def _expand(self, rows, tree: SearchTree, leaf, to_play, value, reward, logits, hidden) -> SearchTree:
        at, all_actions = _at(rows, leaf), tf.ones([tf.shape(rows)[0], self.num_actions], tf.bool)
        return tree._replace(
            expanded=tf.tensor_scatter_nd_update(tree.expanded, at, tf.ones_like(leaf, tf.bool)),
            to_play=tf.tensor_scatter_nd_update(tree.to_play, at, to_play),
            hidden=tf.tensor_scatter_nd_update(tree.hidden, at, hidden),
            reward=tf.tensor_scatter_nd_update(tree.reward, at, tf.cast(reward, tf.float64)),
            children_prior=tf.tensor_scatter_nd_update(tree.children_prior, at, _policy_priors(logits, all_actions)),
            edge_exists=tf.tensor_scatter_nd_update(tree.edge_exists, at, all_actions),
        )

    # The pseudocode's `backpropagate` along B paths of different lengths, leaf to root: each
    # node's value sum and visit count, the min-max bounds, and the discounted return.
    def _backpropagate(self, rows, tree: SearchTree, descent: Descent, value, leaf_to_play) -> SearchTree:
        discount = tf.constant(self.discount, tf.float64)

        def backup_step(backup: Backup) -> Backup:
            depth, value = backup.depth, backup.value
            on_path = depth < descent.length
            idx = _at(rows, descent.path[:, depth])
            to_play = tf.gather_nd(tree.to_play, idx)
            signed = tf.where(to_play == leaf_to_play, value, -value)
            value_sum = tf.tensor_scatter_nd_add(backup.value_sum, idx, tf.where(on_path, signed, 0.0))
            visit_count = tf.tensor_scatter_nd_add(backup.visit_count, idx, tf.cast(on_path, tf.int32))
            node_reward = tf.gather_nd(tree.reward, idx)
            current = _node_value(tf.gather_nd(visit_count, idx), tf.gather_nd(value_sum, idx))
            signed_reward = node_reward
            if self.negamax:  # see `backpropagate`: the parent's player's view, the mover's reward
                mover = tf.gather_nd(tree.to_play, _at(rows, descent.path[:, tf.maximum(depth - 1, 0)]))
                mover = tf.where(depth > 0, mover, to_play)
                current = tf.where(to_play != mover, -current, current)
                signed_reward = tf.where(mover != leaf_to_play, -node_reward, node_reward)
            tracked = node_reward + discount * current if self.search.ucb_value == "normalized_q" else current
            return Backup(
                depth=depth - 1,
                value=tf.where(on_path, signed_reward + discount * value, value),
                visit_count=visit_count,
                value_sum=value_sum,
                maximum=tf.where(on_path, tf.maximum(backup.maximum, tracked), backup.maximum),
                minimum=tf.where(on_path, tf.minimum(backup.minimum, tracked), backup.minimum),
            )

        backup = Backup(
            tf.reduce_max(descent.length) - 1, value, tree.visit_count, tree.value_sum, tree.maximum, tree.minimum
        )
        backup = _while(lambda backup: backup.depth >= 0, backup_step, backup)
        return tree._replace(
            visit_count=backup.visit_count, value_sum=backup.value_sum, maximum=backup.maximum, minimum=backup.minimum
        )
