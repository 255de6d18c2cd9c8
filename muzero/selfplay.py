"""Self-play: `play_game`, one episode searched move by move with the reference MCTS."""

from __future__ import annotations

import numpy as np

from muzero.config import MuZeroConfig
from muzero.environment import Environment
from muzero.game import Game
from muzero.network import Network
from muzero.search import Node, add_exploration_noise, expand_node, run_mcts, select_action


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
