"""Self-play: `play_game` (one episode, the reference MCTS) and `play_games_batched` (many, batched MCTS)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from muzero.batched_search import run_batched_mcts
from muzero.config import MuZeroConfig
from muzero.environment import Environment
from muzero.game import Game
from muzero.network import Network
from muzero.search import Node, add_exploration_noise, expand_node, run_mcts, select_action, softmax_sample


# Each game is produced by starting at the initial board position, then
# repeatedly executing a Monte Carlo Tree Search to generate moves until the end
# of the game is reached.
def play_game(config: MuZeroConfig, network: Network, environment: Environment, rng: np.random.Generator,
              greedy: bool = False) -> Game:
    """Plays one episode and returns it as a `Game` (detached from the environment).

    Args:
      config: search constants, max_moves, discount.
      network: anything with initial_inference / recurrent_inference.
      environment: reset at the start of the game.
      rng: for exploration noise and action sampling.
      greedy: evaluation mode: no exploration noise, temperature 0.
    """
    game = Game(config.action_space_size, config.discount, environment)
    while not game.terminal() and len(game.history) < config.max_moves:
        # At the root of the search tree we use the representation function to
        # obtain a hidden state given the current observation.
        root = Node(0)
        current_observation = game.make_image(-1)
        expand_node(root, game.to_play(), game.legal_actions(),
                    network.initial_inference(current_observation[None]).item(0))
        if not greedy:
            add_exploration_noise(config, root, rng)

        # We then run a Monte Carlo Tree Search using only action sequences and the
        # model learned by the network.
        run_mcts(config, root, game.action_history(), network)
        action = select_action(config, len(game.history), root, network.training_steps(), rng,
                               temperature=0.0 if greedy else None)
        game.apply(action)
        game.store_search_statistics(root)
    game.environment = None
    return game


# Many games at once: one batched search per move for all unfinished games. The
# games run in lockstep until every one has ended, so no game is ever half played
# when the learner runs or a checkpoint is written.
def play_games_batched(config: MuZeroConfig, network_fn: Callable[[], Network], environments: list[Environment],
                       rng: np.random.Generator, greedy: bool = False, refresh_interval: int = 0) -> list[Game]:
    """Plays one game in each environment with `run_batched_mcts`; returns the games in order.

    Args:
      config: search constants, max_moves, discount, temperature schedule.
      network_fn: returns the network to use (SharedStorage.latest_network); called at the
        start and then every `refresh_interval` moves (0: only at the start).
      environments: one per game, each reset at the start.
      rng: Dirichlet noise per game and action sampling, drawn game by game in order.
      greedy: evaluation mode: no exploration noise, temperature 0.
    """
    games = [Game(config.action_space_size, config.discount, environment) for environment in environments]
    network = network_fn()
    move = 0
    while True:
        active = [game for game in games if not game.terminal() and len(game.history) < config.max_moves]
        if not active:
            break
        if refresh_interval and move and move % refresh_interval == 0:
            network = network_fn()
        observations = np.stack([game.make_image(-1) for game in active])
        legal = np.zeros((len(active), config.action_space_size), bool)
        for i, game in enumerate(active):
            legal[i, game.legal_actions()] = True
        noise = None
        if not greedy:
            noise = np.zeros(legal.shape)
            for i in range(len(active)):
                actions = np.flatnonzero(legal[i])
                noise[i, actions] = rng.dirichlet([config.search.root_dirichlet_alpha] * len(actions))
        to_play = np.array([game.to_play() for game in active])
        result = run_batched_mcts(config, network.initial_inference(observations), network, legal, to_play, noise)
        for i, game in enumerate(active):
            visits = [(int(result.visit_counts[i, a]), int(a)) for a in np.flatnonzero(legal[i])]
            temperature = 0.0 if greedy else config.visit_softmax_temperature_fn(len(game.history),
                                                                                  network.training_steps())
            action = softmax_sample(visits, temperature, rng)
            game.apply(action)
            game.store_visit_statistics(result.visit_counts[i].tolist(), result.root_value[i])
        move += 1
    for game in games:
        game.environment = None
    return games
