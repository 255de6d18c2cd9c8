"""The search family's shared types: what a search returns and what a searcher is.

Like mctx's `base.py`, the pieces are named types: a searcher receives the root's
inference and the legal actions of B games and returns their root statistics; the
network comes in only through the pseudocode's `initial_inference`/`recurrent_inference`
(or, for the compiled search, as TensorFlow callables: `RecurrentFn`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

import numpy as np

from muzero.networks.base import Network, NetworkOutput


class SearchResult(NamedTuple):
    """Root statistics of B searches.

    Attributes:
      visit_counts: [B, A] visits of the root's children (0 for illegal actions).
      root_value: [B] the root's mean value, `root.value()`.
      action: [B] the action the search selects (Gumbel MuZero), or None: sample it from
        the visit counts (pUCT, `select_action`).
      policy: [B, A] the policy target (Gumbel MuZero's improved policy), or None: the
        normalised visit counts (pUCT).
    """

    visit_counts: np.ndarray
    root_value: np.ndarray
    action: np.ndarray | None = None
    policy: np.ndarray | None = None


# recurrent(hidden [B, ...], action [B]) -> (value [B], reward [B], policy_logits [B, A], hidden [B, ...]),
# as TensorFlow ops (the compiled search calls it inside its graph).
RecurrentFn = Callable[..., tuple]


class Searcher(Protocol):
    """B game positions searched at once: `expand_node` + `add_exploration_noise` + `run_mcts`
    for each root, tested equal to the reference search (`muzero.search.reference`)."""

    def bind(self, network: Network) -> Network:
        """The network to run the roots' `initial_inference` with, for a published `network`:
        the network itself, or the searcher's own copy of its weights."""

    def __call__(
        self,
        root_output: NetworkOutput,
        network: Network,
        legal: np.ndarray,
        to_play: np.ndarray,
        noise: np.ndarray | None,
    ) -> SearchResult:
        """Searches B roots.

        Args:
          root_output: `network.initial_inference` of the B root observations (numpy).
          network: the bound network (`bind`).
          legal: [B, A] bool, legal actions at each root.
          to_play: [B] int, the player to move at each root.
          noise: [B, A] Dirichlet samples over each root's legal actions, or None (no noise).
        """
