"""Self-play: `play_game` (one episode, the reference MCTS) and `play_games_batched` (many, batched MCTS)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from muzero.batched_search import run_batched_mcts
from muzero.config import MuZeroConfig
from muzero.environment import Environment
from muzero.game import Game
from muzero.network import Network, NetworkOutput, PublishedWeights
from muzero.search import Node, add_exploration_noise, expand_node, run_mcts, select_action, softmax_sample


# Each game is produced by starting at the initial board position, then
# repeatedly executing a Monte Carlo Tree Search to generate moves until the end
# of the game is reached.
def play_game(config: MuZeroConfig, network: Network, environment: Environment, rng: np.random.Generator,
              greedy: bool = False) -> Game:
    """Plays one episode and returns it as a `Game` (detached from the environment).

    Args:
      config: search constants, max_moves, discount.
      network: anything with initial_inference / recurrent_inference (not a resnet's
        `PublishedWeights`: those run in the batched compiled search only).
      environment: reset at the start of the game.
      rng: for exploration noise and action sampling.
      greedy: evaluation mode: no exploration noise, temperature 0.
    """
    game = Game(config.action_space_size, config.discount, environment, config.game.stacked_frames)
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
    set_bootstrap_values(config, network, [game])
    return game


def set_bootstrap_values(config: MuZeroConfig, network: Network, games: list[Game]) -> None:
    """With `game.bootstrap_truncated`, gives each game cut short (not ended) the network's
    value of its last observation, for make_target to bootstrap from."""
    cut = [game for game in games if game.truncated(config.max_moves)]
    if not config.game.bootstrap_truncated or not cut:
        return
    values = network.initial_inference(np.stack([game.make_image(-1) for game in cut])).value
    for game, value in zip(cut, np.asarray(values, np.float64)):
        game.bootstrap_value = float(value)


# Many games at once: one batched search per move for all of them. A game that
# ends is handed back, and its environment starts the next game at the next move.
class BatchedSelfPlay:
    """A game in progress in each environment, advanced together one move at a time.

    Args:
      config: search constants, max_moves, discount, temperature schedule.
      environments: one per game slot.
      searcher: replaces `run_batched_mcts` (e.g. `CompiledSelfPlaySearch`); called as
        searcher(config, root_output, network, legal, to_play, noise).
      restart: start a new game in a slot whose game ended (false: one game per slot).
    """

    def __init__(self, config: MuZeroConfig, environments: list[Environment], searcher: Callable | None = None,
                 restart: bool = True):
        self.config = config
        self.environments = environments
        self.searcher = searcher or run_batched_mcts
        self.restart = restart
        self.games: list[Game | None] = [None] * len(environments)
        self.closed = [False] * len(environments)

    def step(self, network: Network, rng: np.random.Generator, greedy: bool = False) -> list[tuple[int, Game]]:
        """Plays one move in every game in progress; returns (slot, game) for the games that ended.

        Args:
          greedy: evaluation mode: no exploration noise, temperature 0.
        """
        config = self.config
        for i, game in enumerate(self.games):
            if game is None and not self.closed[i]:
                self.games[i] = Game(config.action_space_size, config.discount, self.environments[i],
                                     config.game.stacked_frames)
        slots = [i for i, game in enumerate(self.games) if game is not None]
        if not slots:
            return []
        games = [self.games[i] for i in slots]
        if hasattr(self.searcher, "network_for"):
            network = self.searcher.network_for(network)
        observations = np.stack([game.make_image(-1) for game in games])
        legal = np.zeros((len(games), config.action_space_size), bool)
        for row, game in enumerate(games):
            legal[row, game.legal_actions()] = True
        noise = None
        if not greedy:
            noise = np.zeros(legal.shape)
            for row in range(len(games)):
                actions = np.flatnonzero(legal[row])
                noise[row, actions] = rng.dirichlet([config.search.root_dirichlet_alpha] * len(actions))
        to_play = np.array([game.to_play() for game in games])
        result = self.searcher(config, network.initial_inference(observations), network, legal, to_play, noise)
        finished = []
        for row, (slot, game) in enumerate(zip(slots, games)):
            visits = [(int(result.visit_counts[row, a]), int(a)) for a in np.flatnonzero(legal[row])]
            temperature = 0.0 if greedy else config.visit_softmax_temperature_fn(len(game.history),
                                                                                  network.training_steps())
            game.apply(softmax_sample(visits, temperature, rng))
            game.store_visit_statistics(result.visit_counts[row].tolist(), result.root_value[row])
            if game.terminal() or len(game.history) >= config.max_moves:
                game.environment = None
                finished.append((slot, game))
                self.games[slot] = None
                self.closed[slot] = not self.restart
        set_bootstrap_values(config, network, [game for _, game in finished])
        return finished

    def moves_in_progress(self) -> int:
        return sum(len(game) for game in self.games if game is not None)


def play_games_batched(config: MuZeroConfig, network_fn: Callable[[], Network], environments: list[Environment],
                       rng: np.random.Generator, greedy: bool = False, refresh_interval: int = 0,
                       searcher: Callable | None = None) -> list[Game]:
    """Plays one game in each environment with the batched search; returns them in environment order.

    Args:
      network_fn: returns the network to use; called at the start and then every
        `refresh_interval` moves (0: only at the start).
      greedy: evaluation mode: no exploration noise, temperature 0.
    """
    selfplay = BatchedSelfPlay(config, environments, searcher, restart=False)
    games: list[Game | None] = [None] * len(environments)
    network = network_fn()
    move = 0
    while not all(selfplay.closed):
        if refresh_interval and move and move % refresh_interval == 0:
            network = network_fn()
        for slot, game in selfplay.step(network, rng, greedy):
            games[slot] = game
        move += 1
    return games


class CompiledSelfPlaySearch:
    """`run_batched_mcts`'s signature over `CompiledSearch`: the whole search as one
    TensorFlow graph (XLA when `selfplay.jit_compile`), on a Keras copy of the weights
    of whichever published network it is given. Batches are padded to `batch_size`
    rows, so XLA compiles one program instead of one per number of unfinished games.

    `network_for(published)` loads the published weights into the Keras copy and returns
    it as the network `BatchedSelfPlay` runs the root inference with (the only way to
    run a resnet's `PublishedWeights`).
    """

    def __init__(self, config: MuZeroConfig, observation_shape: tuple[int, ...], batch_size: int):
        import tensorflow as tf

        from muzero.compiled_search import CompiledSearch
        from muzero.models import make_network

        if config.train.mixed_precision and not tf.config.list_physical_devices("GPU"):
            # bfloat16 is emulated, slowly, on CPUs: search in float32 (the weights are float32 either way).
            config = config.replace(train=dataclasses.replace(config.train, mixed_precision=False))
        self.keras_network = make_network(config, observation_shape)
        self.batch_size = batch_size
        self._source: Network | None = None
        self._bound: _KerasInference | None = None
        self._initial = tf.function(lambda x: tuple(self.keras_network.initial_inference(x)[:4]),
                                    input_signature=[self.keras_network.observation_spec])

        def recurrent(hidden_state, action):
            out = self.keras_network.recurrent_inference(hidden_state, action)
            return out.value, out.reward, out.policy_logits, out.hidden_state

        self.search = CompiledSearch(config, recurrent, self.keras_network.hidden_shape,
                                     jit_compile=config.selfplay.jit_compile)

    def network_for(self, network: Network) -> Network:
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

    def __call__(self, config: MuZeroConfig, root_output, network: Network, legal: np.ndarray, to_play: np.ndarray,
                 noise: np.ndarray | None):
        if not isinstance(network, _KerasInference):
            if not hasattr(network, "weights"):
                return run_batched_mcts(config, root_output, network, legal, to_play, noise)
            self.network_for(network)
        rows = len(legal)
        pad = max(self.batch_size - rows, 0)

        def padded(x):
            x = np.asarray(x)
            return np.concatenate([x, np.repeat(x[:1], pad, axis=0)]) if pad else x

        result = self.search(padded(root_output.hidden_state), padded(root_output.policy_logits),
                             padded(root_output.reward), padded(legal), padded(to_play),
                             None if noise is None else padded(noise))
        return type(result)(result.visit_counts[:rows], result.root_value[:rows])


class _KerasInference(Network):
    """Root inference on `CompiledSelfPlaySearch`'s Keras copy, returning numpy arrays;
    the search itself never calls `recurrent_inference` on it (it runs inside the graph)."""

    def __init__(self, initial: Callable, steps: int):
        self._initial = initial
        self._steps = steps

    def initial_inference(self, observation) -> NetworkOutput:
        value, reward, policy_logits, hidden_state = (np.asarray(x) for x in self._initial(observation))
        return NetworkOutput(value, reward, policy_logits, hidden_state)

    def training_steps(self) -> int:
        return self._steps
