"""The compiled search as a self-play `Searcher`: `CompiledSearch` on a Keras twin of the
published network.

Why: the compiled search reads the network inside its graph, so it needs the network as
TensorFlow ops, while self-play holds published weights (numpy arrays, or a resnet's
`PublishedWeights`). `CompiledSearcher` keeps one Keras twin, built by an injected factory
(this family builds no network), loads each newly published network's weights into it, and
pads batches to one size so that XLA compiles one program.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from muzero.config import SearchConfig
from muzero.networks.base import Network, NetworkOutput, PublishedWeights
from muzero.search.batched import run_batched_mcts
from muzero.search.compiled import CompiledSearch
from muzero.search.compiled_gumbel import CompiledGumbelSearch
from muzero.search.gumbel import gumbel_search_roots
from muzero.search.types import SearchResult

if TYPE_CHECKING:
    from muzero.networks.keras import KerasNetwork


class CompiledSearcher:
    """`CompiledSearch` as a `Searcher` for self-play: the whole search as one TensorFlow
    graph (XLA when `selfplay.jit_compile`), on a Keras copy of the weights of whichever
    published network it is bound to. Batches are padded to `batch_size` rows, so XLA
    compiles one program instead of one per number of unfinished games.

    `bind(published)` loads the published weights into the Keras copy and returns it as
    the network to run the root inference with (the only way to run a resnet's
    `PublishedWeights`). The uniform network published before the first save has no
    weights: it is searched with `run_batched_mcts` (Gumbel: `gumbel_search_roots`), which gives
    the same results.

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

        self.search = (CompiledGumbelSearch if search.algorithm == "gumbel" else CompiledSearch)(
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
                unpublished = gumbel_search_roots if self.search_config.algorithm == "gumbel" else run_batched_mcts
                return unpublished(
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
            root_value=padded(root_output.value),
        )
        return SearchResult(*(None if x is None else x[:rows] for x in result))


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
