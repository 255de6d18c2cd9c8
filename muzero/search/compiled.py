"""The batched search compiled into one TensorFlow graph (optionally XLA).

Why: `run_batched_mcts` pays numpy's per-operation cost (microseconds) for every
small array operation of every simulation; at B = 256 that, not arithmetic, is
most of its time. Here the same algorithm (same arrays, same order of float64
operations, same tie-breaking) runs as nested `tf.while_loop`s inside one
`tf.function`, so a whole move's search for B games is one call, and with XLA the
loops compile to native code, as mctx does with JAX.

The network comes in as two TensorFlow callables, `recurrent(hidden [B, ...], action
[B]) -> (value [B], reward [B], policy_logits [B, A], hidden [B, ...])`; the learner's
Keras models are read inside the graph, so new weights need no retracing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from muzero.config import SearchConfig
from muzero.networks.base import Network, NetworkOutput, PublishedWeights
from muzero.search.batched import run_batched_mcts
from muzero.search.types import RecurrentFn, SearchResult

if TYPE_CHECKING:
    from muzero.networks.keras import KerasNetwork


def _policy_priors(logits: tf.Tensor, legal: tf.Tensor) -> tf.Tensor:
    """`search.policy_priors` in TensorFlow: float64, max subtracted, sum in action order."""
    logits = tf.where(legal, tf.cast(logits, tf.float64), tf.constant(-np.inf, tf.float64))
    exp = tf.exp(logits - tf.reduce_max(logits, axis=-1, keepdims=True))
    total = exp[..., 0]
    for a in range(1, exp.shape[-1]):
        total = total + exp[..., a]
    return exp / total[..., None]


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
        n = search.num_simulations
        # pUCT's log and sqrt terms by parent visit count, from Python's math as the reference.
        self.log_term = tf.constant(
            [math.log((v + search.pb_c_base + 1) / search.pb_c_base) + search.pb_c_init for v in range(n + 1)],
            tf.float64,
        )
        self.sqrt_term = tf.constant([math.sqrt(v) for v in range(n + 1)], tf.float64)
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
            ],
        )

    def __call__(self, root_hidden, root_logits, root_reward, legal, root_to_play=None, noise=None) -> SearchResult:
        legal = np.asarray(legal, bool)
        batch = len(legal)
        fraction = self.search.root_exploration_fraction if noise is not None else 0.0
        noise = np.zeros(legal.shape) if noise is None else np.asarray(noise, np.float64)
        to_play = np.zeros(batch, np.int32) if root_to_play is None else np.asarray(root_to_play, np.int32)
        visits, value = self._search(
            np.asarray(root_hidden, np.float32),
            np.asarray(root_logits, np.float32),
            np.asarray(root_reward, np.float32),
            legal,
            noise,
            np.float64(fraction),
            to_play,
        )
        return SearchResult(visit_counts=visits.numpy().astype(np.int64), root_value=value.numpy())

    def _run(self, root_hidden, root_logits, root_reward, legal, noise, fraction, root_to_play):
        search = self.search
        negamax = search.two_player_rule == "negamax" and self.num_players > 1
        discount = tf.constant(self.discount, tf.float64)
        batch = tf.shape(legal)[0]
        num_nodes_max = search.num_simulations + 1
        max_depth = search.num_simulations + 1
        a = self.num_actions
        rows = tf.range(batch)

        def at(node):  # [B] -> [B, 2] indices (row, node)
            return tf.stack([rows, node], axis=1)

        # Tree arrays (see BatchedTree). Node 0 is the root: expand_node + add_exploration_noise.
        prior = _policy_priors(root_logits, legal)
        prior = tf.where(legal, prior * (1 - fraction) + noise * fraction, tf.constant(0.0, tf.float64))
        zeros_bm = tf.zeros([batch, num_nodes_max], tf.float64)
        root_mask = tf.one_hot(tf.zeros([batch], tf.int32), num_nodes_max) > 0
        visit_count = tf.zeros([batch, num_nodes_max], tf.int32)
        value_sum = zeros_bm
        reward = tf.tensor_scatter_nd_update(
            zeros_bm, at(tf.zeros([batch], tf.int32)), tf.cast(root_reward, tf.float64)
        )
        to_play = tf.tensor_scatter_nd_update(
            tf.zeros([batch, num_nodes_max], tf.int32), at(tf.zeros([batch], tf.int32)), root_to_play
        )
        expanded = root_mask
        hidden = tf.zeros(tf.concat([[batch, num_nodes_max], self.hidden_shape], 0), tf.float32)
        hidden = tf.tensor_scatter_nd_update(hidden, at(tf.zeros([batch], tf.int32)), root_hidden)
        children_index = tf.fill([batch, num_nodes_max, a], -1)
        children_prior = tf.tensor_scatter_nd_update(
            tf.zeros([batch, num_nodes_max, a], tf.float64), at(tf.zeros([batch], tf.int32)), prior
        )
        edge_exists = tf.tensor_scatter_nd_update(
            tf.zeros([batch, num_nodes_max, a], tf.bool), at(tf.zeros([batch], tf.int32)), legal
        )
        num_nodes = tf.ones([batch], tf.int32)
        bounds = search.known_bounds
        maximum = tf.fill([batch], tf.constant(bounds.max if bounds else -np.inf, tf.float64))
        minimum = tf.fill([batch], tf.constant(bounds.min if bounds else np.inf, tf.float64))

        def normalize(value, high, low):
            high, low = high[:, None], low[:, None]
            return tf.where(high > low, (value - low) / tf.where(high > low, high - low, 1.0), value)

        def node_value(visits, sums):
            return tf.where(visits > 0, sums / tf.cast(tf.maximum(visits, 1), tf.float64), 0.0)

        def simulation(
            i,
            visit_count,
            value_sum,
            reward,
            to_play,
            expanded,
            hidden,
            children_index,
            children_prior,
            edge_exists,
            num_nodes,
            maximum,
            minimum,
        ):
            # Selection: descend every tree until an unexpanded node.
            def select_step(node, active, depth, path_nodes, path_actions, length, children_index, num_nodes):
                parent_visits = tf.gather_nd(visit_count, at(node))
                children = tf.gather(children_index, node, batch_dims=1)  # [B, A]
                safe = tf.maximum(children, 0)
                exists = children >= 0
                child_visits = tf.where(exists, tf.gather(visit_count, safe, batch_dims=1), 0)
                child_value = node_value(child_visits, tf.gather(value_sum, safe, batch_dims=1))
                child_reward = tf.gather(reward, safe, batch_dims=1)
                if negamax:  # `value_for_parent`: the other player's value, negated
                    other = tf.gather(to_play, safe, batch_dims=1) != tf.gather_nd(to_play, at(node))[:, None]
                    child_value = tf.where(other, -child_value, child_value)
                pb_c = tf.gather(self.log_term, parent_visits)[:, None] * (
                    tf.gather(self.sqrt_term, parent_visits)[:, None] / tf.cast(child_visits + 1, tf.float64)
                )
                prior_score = pb_c * tf.gather(children_prior, node, batch_dims=1)
                if search.ucb_value == "normalized_q":
                    value = normalize(child_reward + discount * child_value, maximum, minimum)
                else:
                    value = child_reward + discount * normalize(child_value, maximum, minimum)
                score = prior_score + tf.where(child_visits > 0, value, 0.0)
                score = tf.where(tf.gather(edge_exists, node, batch_dims=1), score, tf.constant(-np.inf, tf.float64))
                action = a - 1 - tf.argmax(tf.reverse(score, [1]), axis=1, output_type=tf.int32)
                edge = tf.stack([rows, node, action], axis=1)
                child = tf.gather_nd(children_index, edge)
                new = active & (child < 0)
                child = tf.where(new, num_nodes, child)
                children_index = tf.tensor_scatter_nd_update(children_index, edge, child)
                num_nodes = num_nodes + tf.cast(new, tf.int32)
                node = tf.where(active, child, node)
                length = length + tf.cast(active, tf.int32)
                path_nodes = tf.tensor_scatter_nd_update(path_nodes, at(tf.fill([batch], depth + 1)), node)
                path_actions = tf.tensor_scatter_nd_update(path_actions, at(tf.fill([batch], depth)), action)
                active = active & tf.gather_nd(expanded, at(node))
                return node, active, depth + 1, path_nodes, path_actions, length, children_index, num_nodes

            start = tf.zeros([batch], tf.int32)
            _, _, _, path_nodes, path_actions, length, children_index, num_nodes = tf.while_loop(
                lambda node, active, *_: tf.reduce_any(active),
                select_step,
                (
                    start,
                    tf.gather_nd(expanded, at(start)),
                    tf.constant(0),
                    tf.zeros([batch, max_depth + 1], tf.int32),
                    tf.zeros([batch, max_depth], tf.int32),
                    tf.ones([batch], tf.int32),
                    children_index,
                    num_nodes,
                ),
            )
            leaf = tf.gather(path_nodes, length - 1, batch_dims=1)
            parent = tf.gather(path_nodes, length - 2, batch_dims=1)
            last_action = tf.gather(path_actions, length - 2, batch_dims=1)

            # One network call for all B leaves, then expand them.
            leaf_value, leaf_reward, leaf_logits, leaf_hidden = self.recurrent(
                tf.gather_nd(hidden, at(parent)), last_action
            )
            if self.num_players > 1:
                leaf_to_play = (root_to_play + length - 1) % self.num_players
            else:
                leaf_to_play = root_to_play
            expanded = tf.tensor_scatter_nd_update(expanded, at(leaf), tf.ones([batch], tf.bool))
            to_play = tf.tensor_scatter_nd_update(to_play, at(leaf), leaf_to_play)
            hidden = tf.tensor_scatter_nd_update(hidden, at(leaf), leaf_hidden)
            reward = tf.tensor_scatter_nd_update(reward, at(leaf), tf.cast(leaf_reward, tf.float64))
            children_prior = tf.tensor_scatter_nd_update(
                children_prior, at(leaf), _policy_priors(leaf_logits, tf.ones([batch, a], tf.bool))
            )
            edge_exists = tf.tensor_scatter_nd_update(edge_exists, at(leaf), tf.ones([batch, a], tf.bool))

            # Backpropagation, leaf to root along paths of different lengths.
            def backup_step(depth, value, visit_count, value_sum, maximum, minimum):
                on_path = depth < length
                node = path_nodes[:, depth]
                idx = at(node)
                signed = tf.where(tf.gather_nd(to_play, idx) == leaf_to_play, value, -value)
                value_sum = tf.tensor_scatter_nd_add(value_sum, idx, tf.where(on_path, signed, 0.0))
                visit_count = tf.tensor_scatter_nd_add(visit_count, idx, tf.cast(on_path, tf.int32))
                node_r = tf.gather_nd(reward, idx)
                current = node_value(tf.gather_nd(visit_count, idx), tf.gather_nd(value_sum, idx))
                signed_r = node_r
                if negamax:  # see `backpropagate`: the parent's player's view, the mover's reward
                    mover = tf.gather_nd(to_play, at(path_nodes[:, tf.maximum(depth - 1, 0)]))
                    mover = tf.where(depth > 0, mover, tf.gather_nd(to_play, idx))
                    current = tf.where(tf.gather_nd(to_play, idx) != mover, -current, current)
                    signed_r = tf.where(mover != leaf_to_play, -node_r, node_r)
                tracked = node_r + discount * current if search.ucb_value == "normalized_q" else current
                maximum = tf.where(on_path, tf.maximum(maximum, tracked), maximum)
                minimum = tf.where(on_path, tf.minimum(minimum, tracked), minimum)
                value = tf.where(on_path, signed_r + discount * value, value)
                return depth - 1, value, visit_count, value_sum, maximum, minimum

            _, _, visit_count, value_sum, maximum, minimum = tf.while_loop(
                lambda depth, *_: depth >= 0,
                backup_step,
                (tf.reduce_max(length) - 1, tf.cast(leaf_value, tf.float64), visit_count, value_sum, maximum, minimum),
            )
            return (
                i + 1,
                visit_count,
                value_sum,
                reward,
                to_play,
                expanded,
                hidden,
                children_index,
                children_prior,
                edge_exists,
                num_nodes,
                maximum,
                minimum,
            )

        state = tf.while_loop(
            lambda i, *_: i < search.num_simulations,
            simulation,
            (
                tf.constant(0),
                visit_count,
                value_sum,
                reward,
                to_play,
                expanded,
                hidden,
                children_index,
                children_prior,
                edge_exists,
                num_nodes,
                maximum,
                minimum,
            ),
        )
        visit_count, value_sum, children_index = state[1], state[2], state[7]
        root_children = children_index[:, 0]
        visits = tf.where(root_children >= 0, tf.gather(visit_count, tf.maximum(root_children, 0), batch_dims=1), 0)
        root_value = node_value(visit_count[:, 0], value_sum[:, 0])
        return visits, root_value


class CompiledSearcher:
    """`CompiledSearch` as a `Searcher` for self-play: the whole search as one TensorFlow
    graph (XLA when `selfplay.jit_compile`), on a Keras copy of the weights of whichever
    published network it is bound to. Batches are padded to `batch_size` rows, so XLA
    compiles one program instead of one per number of unfinished games.

    `bind(published)` loads the published weights into the Keras copy and returns it as
    the network to run the root inference with (the only way to run a resnet's
    `PublishedWeights`). The uniform network published before the first save has no
    weights: it is searched with `run_batched_mcts`, which gives the same visit counts.

    Args:
      search: the `search` section.
      discount: the game's discount.
      network_factory: builds the Keras twin of the network being searched (the same kind and
        shapes as the published weights; float32 on a CPU).
      batch_size: rows every search is padded to (the games searched at once).
      num_players: 1, or 2 when players alternate.
      jit_compile: compile the search with XLA (`selfplay.jit_compile`).
    """

    def __init__(
        self,
        search: SearchConfig,
        discount: float,
        network_factory: Callable[[], KerasNetwork],
        batch_size: int,
        num_players: int = 1,
        jit_compile: bool = True,
    ):
        self.search_config, self.discount = search, discount
        self.num_players = num_players
        self.keras_network = network_factory()
        self.batch_size = batch_size
        self._source: Network | None = None
        self._bound: _KerasInference | None = None
        self._initial = tf.function(
            lambda x: tuple(self.keras_network.initial_inference(x)[:4]),
            input_signature=[self.keras_network.observation_spec],
        )

        def recurrent(hidden_state, action):
            out = self.keras_network.recurrent_inference(hidden_state, action)
            return out.value, out.reward, out.policy_logits, out.hidden_state

        self.search = CompiledSearch(
            search,
            discount,
            self.keras_network.action_space_size,
            recurrent,
            self.keras_network.hidden_shape,
            jit_compile=jit_compile,
            num_players=num_players,
        )

    def bind(self, network: Network) -> Network:
        """Loads `network`'s weights into the Keras copy; returns the network to run the root
        inference with: the Keras copy for `PublishedWeights`, else `network` itself (a numpy
        network runs its own; the uniform network before the first save has no weights)."""
        if not hasattr(network, "weights"):
            return network
        if network is not self._source:
            self.keras_network.set_weights(network.weights)
            self._source = network
            self._bound = _KerasInference(self._initial, network.training_steps())
        return self._bound if isinstance(network, PublishedWeights) else network

    def __call__(
        self,
        root_output: NetworkOutput,
        network: Network,
        legal: np.ndarray,
        to_play: np.ndarray,
        noise: np.ndarray | None,
    ) -> SearchResult:
        if not isinstance(network, _KerasInference):
            if not hasattr(network, "weights"):
                return run_batched_mcts(
                    self.search_config,
                    self.discount,
                    root_output,
                    network,
                    legal,
                    to_play,
                    noise,
                    self.num_players,
                )
            self.bind(network)
        rows = len(legal)
        pad = max(self.batch_size - rows, 0)

        def padded(x):
            x = np.asarray(x)
            return np.concatenate([x, np.repeat(x[:1], pad, axis=0)]) if pad else x

        result = self.search(
            padded(root_output.hidden_state),
            padded(root_output.policy_logits),
            padded(root_output.reward),
            padded(legal),
            padded(to_play),
            None if noise is None else padded(noise),
        )
        return SearchResult(result.visit_counts[:rows], result.root_value[:rows])


class _KerasInference(Network):
    """Root inference on `CompiledSearcher`'s Keras copy, returning numpy arrays; the search
    itself never calls `recurrent_inference` on it (it runs inside the graph)."""

    def __init__(self, initial: Callable, steps: int):
        self._initial = initial
        self._steps = steps

    def initial_inference(self, observation) -> NetworkOutput:
        value, reward, policy_logits, hidden_state = (np.asarray(x) for x in self._initial(observation))
        return NetworkOutput(value, reward, policy_logits, hidden_state)

    def training_steps(self) -> int:
        return self._steps
