"""Self-play: `play_game` (one episode, the reference MCTS), `BatchedSelfPlay` (many games, one
batched search per move), and `LocalSelfPlay`, the in-process self-play source of a run.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from muzero.config import GameConfig, MuZeroConfig, SearchConfig, visit_softmax_temperature
from muzero.envs.base import Environment
from muzero.game import Game
from muzero.networks.base import Network
from muzero.search.batched import BatchedSearcher
from muzero.search.gumbel import run_gumbel_mcts
from muzero.search.reference import Node, add_exploration_noise, expand_node, run_mcts, select_action, softmax_sample
from muzero.search.types import Searcher, SearchResult
from muzero.storage import SharedStorage
from muzero.symmetries import Symmetry, search_roots


# Each game is produced by starting at the initial board position, then
# repeatedly executing a Monte Carlo Tree Search to generate moves until the end
# of the game is reached.
def play_game(
    config: MuZeroConfig, network: Network, environment: Environment, rng: np.random.Generator, greedy: bool = False
) -> Game:
    """Plays one episode and returns it as a `Game` (detached from the environment).

    Args:
      config: search constants, max_moves, discount.
      network: anything with initial_inference / recurrent_inference (not a resnet's
        `PublishedWeights`: those run in the compiled search only).
      environment: reset at the start of the game.
      rng: for exploration noise and action sampling.
      greedy: evaluation mode: no exploration noise, temperature 0.
    """
    game = Game(config.action_space_size, config.discount, environment, config.game.stacked_frames)
    while not game.terminal() and len(game.history) < config.max_moves:
        action, root, policy = search_move(config, network, game, rng, greedy)
        if not greedy and random_move(
            len(game.history),
            network.training_steps(),
            config.selfplay.random_opening_moves,
            config.selfplay.random_moves_before_step,
        ):
            legal = game.legal_actions()
            action = int(rng.choice(legal))
            if config.selfplay.random_move_policy_target == "uniform":
                policy = np.isin(np.arange(config.action_space_size), legal) / len(legal)
        game.apply(action)
        game.store_search_statistics(root, policy)
    game.environment = None
    set_bootstrap_values(config.game, network, [game])
    return game


def random_move(moves_played: int, training_steps: int, opening_moves: int, before_step: int) -> bool:
    """Whether self-play's next move is uniformly random: one of the game's first `opening_moves`
    (`selfplay.random_opening_moves`), or the network has trained fewer than `before_step` steps
    (`selfplay.random_moves_before_step`)."""
    return moves_played < opening_moves or training_steps < before_step


def search_move(
    config: MuZeroConfig, network: Network, game: Game, rng: np.random.Generator | None, greedy: bool = False
) -> tuple[int, Node, np.ndarray | None]:
    """The move the reference search picks in `game`, the searched root, and the search's
    policy target (Gumbel MuZero's improved policy; None for pUCT: the visit counts).

    Args:
      rng: for exploration noise and action sampling; unused (may be None) when greedy.
      greedy: no exploration noise, temperature 0 (the most visited action; Gumbel: the
        search's choice without Gumbel noise).
    """
    # At the root of the search tree we use the representation function to
    # obtain a hidden state given the current observation.
    root = Node(0)
    current_observation = game.make_image(-1)
    root_output = network.initial_inference(current_observation[None]).item(0)
    expand_node(root, game.to_play(), game.legal_actions(), root_output)
    if config.search.algorithm == "gumbel":
        legal = np.zeros(config.action_space_size, bool)
        legal[game.legal_actions()] = True
        logits = np.where(legal, np.asarray(root_output.policy_logits, np.float64), -np.inf)
        gumbel = np.zeros(len(legal)) if greedy else rng.gumbel(size=len(legal))
        action, policy = run_gumbel_mcts(config, root, game.action_history(), network, logits, gumbel)
        return action, root, policy
    if not greedy:
        add_exploration_noise(config, root, rng)

    # We then run a Monte Carlo Tree Search using only action sequences and the
    # model learned by the network.
    run_mcts(config, root, game.action_history(), network)
    action = select_action(
        config, len(game.history), root, network.training_steps(), rng, temperature=0.0 if greedy else None
    )
    return action, root, None


def set_bootstrap_values(game_config: GameConfig, network: Network, games: list[Game]) -> None:
    """With `game.bootstrap_truncated`, gives each game cut short (not ended, or at
    `game.max_moves`) the network's value of its last observation, for make_target to bootstrap from."""
    cut = [game for game in games if game.truncated(game_config.max_moves)]
    if not game_config.bootstrap_truncated or not cut:
        return
    values = network.initial_inference(np.stack([game.make_image(-1) for game in cut])).value
    for game, value in zip(cut, np.asarray(values, np.float64)):
        game.bootstrap_value = float(value)


# Many games at once: one batched search per move for all of them. A game that
# ends is handed back, and its environment starts the next game at the next move.
def root_noise(alpha: float, legal: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """`add_exploration_noise`'s Dirichlet(alpha) samples for B roots, over each root's legal
    actions (0 elsewhere): [B, A] float64, drawn row by row."""
    noise = np.zeros(legal.shape)
    for row in range(len(legal)):
        actions = np.flatnonzero(legal[row])
        noise[row, actions] = rng.dirichlet([alpha] * len(actions))
    return noise


def self_play_noise(search: SearchConfig, legal: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Self-play's root noise for B roots, [B, A]: Gumbel(0, 1) samples for Gumbel MuZero
    (its searchers read them as the roots' Gumbel noise), else `root_noise`'s Dirichlet samples."""
    if search.algorithm == "gumbel":
        return rng.gumbel(size=legal.shape)
    return root_noise(search.root_dirichlet_alpha, legal, rng)


def search_games(
    searcher: Searcher,
    network: Network,
    games: list[Game],
    rng: np.random.Generator | None = None,
    search: SearchConfig | None = None,
    symmetries: tuple[Symmetry, ...] = (),
    symmetry_rng: np.random.Generator | None = None,
) -> tuple[SearchResult, np.ndarray]:
    """One batched search at the current position of each of the B `games`.

    Args:
      network: bound to `searcher` (`searcher.bind`).
      rng: draws the roots' exploration noise (`self_play_noise` for the `search` section);
        None: no noise (greedy play).
      symmetries, symmetry_rng: `search_roots`'s (greedy play too draws the images).

    Returns:
      (the search's root statistics, legal actions [B, A] bool).
    """
    observations = np.stack([game.make_image(-1) for game in games])
    legal = np.zeros((len(games), games[0].action_space_size), bool)
    for row, game in enumerate(games):
        legal[row, game.legal_actions()] = True
    noise = None if rng is None else self_play_noise(search, legal, rng)
    to_play = np.array([game.to_play() for game in games])
    return search_roots(searcher, network, observations, legal, to_play, noise, symmetries, symmetry_rng), legal


def legal_visits(result: SearchResult, legal: np.ndarray, row: int) -> list[tuple[int, int]]:
    """Row `row` of `search_games`' result as `softmax_sample` takes it: (visit count, action)
    for each legal action."""
    return [(int(result.visit_counts[row, a]), int(a)) for a in np.flatnonzero(legal[row])]


def chosen_action(
    result: SearchResult, legal: np.ndarray, row: int, temperature: float, rng: np.random.Generator | None
) -> int:
    """The move for row `row`: the search's own choice when it makes one (Gumbel MuZero),
    else sampled from the visit counts at `temperature` (`select_action`)."""
    if result.action is not None:
        return int(result.action[row])
    return softmax_sample(legal_visits(result, legal, row), temperature, rng)


class BatchedSelfPlay:
    """A game in progress in each environment, advanced together one move at a time.

    With `search.random_symmetry`, each move is searched from an image of its position under one
    of the environments' `symmetries` (`muzero.symmetries.search_roots`), drawn with `step`'s rng.

    Args:
      game_config: the `game` section (actions, discount, stacked frames, max_moves, bootstrapping).
      search: the `search` section (root noise, temperature schedule; the default searcher's constants).
      environments: one per game slot.
      searcher: how the B roots are searched (`muzero.search.make_searcher`); default: the
        numpy `run_batched_mcts`, for the environments' number of players.
      restart: start a new game in a slot whose game ended (false: one game per slot).
      random_opening_moves: `selfplay.random_opening_moves` (not in greedy play).
      random_moves_before_step: `selfplay.random_moves_before_step` (not in greedy play).
      uniform_random_targets: `selfplay.random_move_policy_target` is "uniform": a random
        move's policy target is uniform over the legal actions, not the search's visits.
      segment: (length L, following F) with `selfplay.segment_length`: a game in progress
        hands back its next L moves as a segment (`Game.segment`) once F more have been
        played, and the rest when it ends; None: whole games.
    """

    def __init__(
        self,
        game_config: GameConfig,
        search: SearchConfig,
        environments: list[Environment],
        searcher: Searcher | None = None,
        restart: bool = True,
        random_opening_moves: int = 0,
        segment: tuple[int, int] | None = None,
        random_moves_before_step: int = 0,
        uniform_random_targets: bool = False,
    ):
        self.game_config, self.search = game_config, search
        self.segment = segment
        self.moves_played = 0
        self.environments = environments
        players = environments[0].num_players if environments else 1
        self.searcher = searcher or BatchedSearcher(search, game_config.discount, players)
        self.restart = restart
        self.random_opening_moves = random_opening_moves
        self.random_moves_before_step = random_moves_before_step
        self.uniform_random_targets = uniform_random_targets
        # `search.random_symmetry`: each move searched from an image of its position (the environments' symmetries).
        symmetric = bool(search.random_symmetry and environments)
        self.symmetries = tuple(getattr(environments[0], "symmetries", ())) if symmetric else ()
        if symmetric and not self.symmetries:
            raise ValueError(f"search.random_symmetry: {type(environments[0]).__name__} has no symmetries")
        self.games: list[Game | None] = [None] * len(environments)
        self.closed = [False] * len(environments)

    def step(self, network: Network, rng: np.random.Generator, greedy: bool = False) -> list[tuple[int, Game]]:
        """Plays one move in every game in progress; returns (slot, game) for the games that ended
        (with `segment`: (slot, segment) for the segments handed back, the last of a game when it ended).

        Args:
          greedy: evaluation mode: no exploration noise, temperature 0.
        """
        game_config = self.game_config
        for i, game in enumerate(self.games):
            if game is None and not self.closed[i]:
                self.games[i] = Game(
                    game_config.action_space_size,
                    game_config.discount,
                    self.environments[i],
                    game_config.stacked_frames,
                )
        slots = [i for i, game in enumerate(self.games) if game is not None]
        if not slots:
            return []
        games = [self.games[i] for i in slots]
        network = self.searcher.bind(network)
        noise_rng = None if greedy else rng
        result, legal = search_games(self.searcher, network, games, noise_rng, self.search, self.symmetries, rng)
        finished = []
        schedule = self.search.visit_softmax_temperature
        training_steps = network.training_steps()  # one network for every row of this move
        for row, (slot, game) in enumerate(zip(slots, games)):
            temperature = 0.0 if greedy else visit_softmax_temperature(schedule, len(game.history), training_steps)
            policy = None if result.policy is None else result.policy[row]
            if not greedy and random_move(
                len(game.history), training_steps, self.random_opening_moves, self.random_moves_before_step
            ):
                action = int(rng.choice(np.flatnonzero(legal[row])))
                if self.uniform_random_targets:
                    policy = legal[row] / legal[row].sum()
            else:
                action = chosen_action(result, legal, row, temperature, rng)
            game.apply(action)
            game.store_visit_statistics(result.visit_counts[row].tolist(), result.root_value[row], policy)
            if game.terminal() or len(game.history) >= game_config.max_moves:
                game.environment = None
                finished.append((slot, game))
                self.games[slot] = None
                self.closed[slot] = not self.restart
        self.moves_played += len(slots)
        set_bootstrap_values(game_config, network, [game for _, game in finished])
        if self.segment is None:
            return finished
        return self._segments(slots, games) + [(slot, self._last_segment(game)) for slot, game in finished]

    def _segments(self, slots: list[int], games: list[Game]) -> list[tuple[int, Game]]:
        """The segments of the games in progress that have played their next L + F moves."""
        length, following = self.segment
        ready = []
        for slot, game in zip(slots, games):
            if self.games[slot] is game and len(game.history) - game.segment_start >= length + following:
                ready.append((slot, game.segment(game.segment_start, game.segment_start + length, following)))
                game.segment_start += length
        return ready

    @staticmethod
    def _last_segment(game: Game) -> Game:
        """An ended game's moves not handed back yet; the game itself when none were."""
        return game.segment(game.segment_start, len(game), 0, final=True) if game.segment_start else game

    def moves_in_progress(self) -> int:
        return sum(len(game) for game in self.games if game is not None)

    def play(self, network: Network, rng: np.random.Generator, moves: int = 1) -> tuple[list[Game], int]:
        """`moves` batched moves (one in every game in progress each); returns the games that
        ended (or segments, with `segment`) and the number of moves played in all games."""
        games: list[Game] = []
        before = self.moves_played
        for _ in range(moves):
            games.extend(game for _, game in self.step(network, rng))
        return games, self.moves_played - before


def play_games_batched(
    game_config: GameConfig,
    search: SearchConfig,
    network_fn: Callable[[], Network],
    environments: list[Environment],
    rng: np.random.Generator,
    greedy: bool = False,
    refresh_interval: int = 0,
    searcher: Searcher | None = None,
) -> list[Game]:
    """Plays one game in each environment with the batched search; returns them in environment order.

    Args:
      game_config, search: the sections `BatchedSelfPlay` takes.
      network_fn: returns the network to use; called at the start and then every
        `refresh_interval` moves (0: only at the start).
      greedy: evaluation mode: no exploration noise, temperature 0.
    """
    selfplay = BatchedSelfPlay(game_config, search, environments, searcher, restart=False)
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


class SelfPlayStopped(RuntimeError):
    """A self-play source can no longer play (the Ray actors' restarts are used up); one line."""


class SelfPlaySource:
    """Where a run's games come from: `LocalSelfPlay` here, `muzero.actors.RaySelfPlay` on Ray.

    The training loop calls `play` whenever the learner has caught up with self-play.

    Attributes:
      concurrent: it plays while the learner trains (actors), not only inside `play`.
    """

    concurrent = False

    def play(
        self, storage: SharedStorage, rng: np.random.Generator, should_stop: Callable[[], bool], start_step: int
    ) -> tuple[list[Game], int]:
        """Plays with the newest network in `storage`; returns the games that ended and the
        number of moves played (in all games, ended or not). `start_step` is the learner's step."""
        raise NotImplementedError

    def state(self) -> tuple[list[Environment], list[Game | None]]:
        """(environments, games in progress) to checkpoint; empty when they cannot be."""
        return [], []

    def load_state(self, environments: list[Environment], games: list[Game | None]) -> None:
        """Continues the checkpointed games when they are this source's kind (else starts afresh)."""

    def metrics(self) -> dict[str, float]:
        return {}

    def progress(self) -> str:
        """Appended to the progress line."""
        return ""

    def result(self) -> dict:
        """Added to the run's final figures."""
        return {}

    def close(self) -> None:
        pass


# One whole game of self-play in an environment: `play_game` with the run's config bound.
GamePlayer = Callable[[Network, Environment, np.random.Generator], Game]


class LocalSelfPlay(SelfPlaySource):
    """Self-play in this process: one move in each of `selfplay.num_envs` games in progress
    (`selfplay.batched`), or one whole game with the reference search, per call.

    Args:
      environments: num_envs environments (batched), or one.
      batched: plays one move in every game per call (a `BatchedSelfPlay` over `environments`).
      play_one_game: without `batched`: plays one whole game per call in environments[0]
        (`functools.partial(play_game, config)`).
      refresh_interval: `selfplay.refresh_interval`: batched moves between pulls of the newest network.
    """

    def __init__(
        self,
        environments: list[Environment],
        batched: BatchedSelfPlay | None = None,
        play_one_game: GamePlayer | None = None,
        refresh_interval: int = 1,
    ):
        if (batched is None) == (play_one_game is None):
            raise ValueError("LocalSelfPlay plays either batched or one game at a time: give one of the two")
        self.environments = environments
        self.batched = batched
        self.play_one_game = play_one_game
        self.refresh_interval = refresh_interval
        self.network: Network | None = None
        self.calls = 0

    def play(
        self, storage: SharedStorage, rng: np.random.Generator, should_stop: Callable[[], bool], start_step: int
    ) -> tuple[list[Game], int]:
        if self.batched is None:
            game = self.play_one_game(storage.latest_network(), self.environments[0], rng)
            return [game], len(game)
        # The newest published network, pulled every refresh_interval moves.
        if self.calls % self.refresh_interval == 0:
            self.network = storage.latest_network()
        self.calls += 1
        return self.batched.play(self.network, rng)

    def state(self) -> tuple[list[Environment], list[Game | None]]:
        # Environments are pickled whole (gymnasium's CartPole pickles with its state), with
        # the games in progress that hold them, so a resumed run continues those games.
        return self.environments, (self.batched.games if self.batched else [])

    def load_state(self, environments: list[Environment], games: list[Game | None]) -> None:
        # A checkpoint of the Ray back end has no environments: fresh games then.
        if len(environments) != len(self.environments):
            return
        self.environments = environments
        if self.batched is not None:
            self.batched.environments = environments
            self.batched.games = games
