"""MuZero playing greedily (no exploration noise, temperature 0): evaluation, matches, `muzero play`.

Why a player object: greedy play runs either the reference search game by game (the
pseudocode's `run_mcts`, which takes the whole config) or one batched search over all the
games at once (the searcher `selfplay.search` names). `make_greedy_player` makes that choice
from the config once; evaluation, the arena, `muzero play` and the exact match take the
player and never see the config.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from muzero.config import GameConfig, MuZeroConfig, SearchConfig
from muzero.envs import Environment, EnvironmentSpec
from muzero.factories import make_run_searcher
from muzero.game import Game
from muzero.networks.base import Network
from muzero.search import Searcher
from muzero.selfplay import chosen_action, play_game, play_games_batched, search_games, search_move


class GreedyPlayer:
    """MuZero's greedy moves and games with one search.

    Attributes:
      side_by_side: the games are played together, one per environment, and searched as one
        batch (false: one after the other, each searched alone).
    """

    side_by_side = False

    def moves(self, network: Network, games: list[Game]) -> list[int]:
        """The most visited action of a search at the current position of each of `games`.

        Args:
          network: as self-play runs it (a resnet's `PublishedWeights` need the compiled search).
        """
        raise NotImplementedError

    def play(
        self, network: Network, environments: list[Environment], episodes: int, rng: np.random.Generator
    ) -> list[Game]:
        """`episodes` whole greedy games: side by side, one in each of environments[:episodes]
        (`side_by_side`), else one after the other in environments[0]. `rng` draws no noise; it
        draws the searched images with `search.random_symmetry`, and is passed on as self-play's games take it."""
        raise NotImplementedError


class ReferencePlayer(GreedyPlayer):
    """The reference search (`run_mcts`) game by game, as `play_game(config, ...)` runs it.

    Args:
      config: the run's config; the reference search reads its `search` section and discount.
    """

    def __init__(self, config: MuZeroConfig):
        self.config = config

    def moves(self, network: Network, games: list[Game]) -> list[int]:
        return [search_move(self.config, network, game, None, greedy=True)[0] for game in games]

    def play(
        self, network: Network, environments: list[Environment], episodes: int, rng: np.random.Generator
    ) -> list[Game]:
        return [play_game(self.config, network, environments[0], rng, greedy=True) for _ in range(episodes)]


class BatchedPlayer(GreedyPlayer):
    """One batched search of all the games at once (`muzero.search.make_searcher`).

    Args:
      game_config: the `game` section (what a `Game` records; max_moves).
      search: the `search` section (`BatchedSelfPlay` takes it).
      searcher: made for as many rows as the games played at once.
    """

    side_by_side = True

    def __init__(self, game_config: GameConfig, search: SearchConfig, searcher: Searcher):
        self.game_config, self.search, self.searcher = game_config, search, searcher

    def moves(self, network: Network, games: list[Game]) -> list[int]:
        result, legal = search_games(self.searcher, self.searcher.bind(network), games)
        return [chosen_action(result, legal, row, 0.0, None) for row in range(len(games))]

    def play(
        self, network: Network, environments: list[Environment], episodes: int, rng: np.random.Generator
    ) -> list[Game]:
        return play_games_batched(
            self.game_config,
            self.search,
            lambda: network,
            environments[:episodes],
            rng,
            greedy=True,
            searcher=self.searcher,
        )


def with_eval_simulations(config: MuZeroConfig, num_simulations: int | None = None) -> MuZeroConfig:
    """The config greedy play searches with: `num_simulations` simulations when given, else
    `run.eval_simulations` when set, else the search's own (`search.num_simulations`).

    Why: a CPU config cuts self-play's budget (MinAtar: 16 simulations), and greedy play with
    so few can score far below the same network searched more (docs/sample_efficiency_freeway.md).
    """
    simulations = config.run.eval_simulations if num_simulations is None else num_simulations
    if not simulations:
        return config
    return config.replace(search=dataclasses.replace(config.search, num_simulations=simulations))


def make_greedy_player(config: MuZeroConfig, spec: EnvironmentSpec, games: int) -> GreedyPlayer:
    """The player `selfplay.batched` names: a batched search for `games` games at once
    (`make_run_searcher`), or the reference search game by game."""
    if not config.selfplay.batched:
        return ReferencePlayer(config)
    return BatchedPlayer(config.game, config.search, make_run_searcher(config, spec, games))
