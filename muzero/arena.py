"""MuZero against opponents in two-player board games: win, draw and loss counts per side.

Why: a board-game agent's strength is only known against an opponent. The opponents are
OpenSpiel's own, of rising strength:

* `random`: OpenSpiel's uniform random bot's rule (a legal move uniformly at random);
* `mcts:N`: OpenSpiel's MCTS bot with N simulations and random rollouts (its C++
  `pyspiel.MCTSBot`, UCT constant 2, one rollout per leaf, solving proven wins);
* `perfect`: exact minimax (negamax) with the game-theoretic value of every move,
  picking uniformly among the optimal ones, so that 100 games are not 100 copies of
  one game; for games small enough to solve (tic-tac-toe: 4,520 positions).

MuZero plays greedily (`muzero.greedy`): no exploration noise, temperature 0. The games of
a match are played side by side, so that MuZero's moves in all of them are one batched
search (the searcher `selfplay.search` names: the compiled search runs resnets and batches
the network calls), or, with `selfplay.batched: false`, the reference search (`run_mcts`)
game by game. Half the games it moves first, half second.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np

from muzero.config import GameConfig, parse_opponent
from muzero.envs import EnvironmentSpecError, resolve_game
from muzero.envs.openspiel import PLUGIN as OPENSPIEL
from muzero.envs.openspiel import OpenSpielEnvironment
from muzero.game import Game
from muzero.greedy import GreedyPlayer
from muzero.networks.base import Network
from muzero.video import VideoUnavailable, video_suffix, write_video

# Positions an exact search may visit before the game counts as too large to solve.
PERFECT_PLAY_LIMIT = 200_000
# Match videos (`save_match_videos`): moves a second, and how long the final position stays.
BOARD_FPS = 2.0
HOLD_SECONDS = 2.0


class OpponentError(ValueError):
    """An opponent that cannot be made (an unknown name, a game too large to solve); one line."""


Opponent = Callable[[object], int]  # pyspiel state -> action


def make_opponent(name: str, game, seed: int) -> Opponent:
    """The opponent `name` names ("random", "perfect", "mcts:N") for the pyspiel `game`."""
    try:
        kind, simulations = parse_opponent(name)
    except ValueError:
        raise OpponentError(f"unknown opponent {name!r}: expected random, perfect or mcts:N (N simulations)") from None
    rng = np.random.default_rng(seed)
    if kind == "random":
        return lambda state: int(rng.choice(state.legal_actions()))
    if kind == "perfect":
        return PerfectPlayer(game, rng)
    import pyspiel

    bot = pyspiel.MCTSBot(game, pyspiel.RandomRolloutEvaluator(1, seed), 2.0, simulations, 1000, True, seed, False)
    return lambda state: int(bot.step(state))


def board_game(game: GameConfig, seed: int = 0) -> OpenSpielEnvironment:
    """The OpenSpiel environment the `game` section names.

    Raises:
      OpponentError: the game is not an OpenSpiel board game.
    """
    plugin, name = resolve_game(game.id)
    if plugin is not OPENSPIEL:
        raise OpponentError(f"only for two-player board games (game.id openspiel:...), not {game.id}")
    return plugin.make(name, seed, game.kwargs)


def check_opponents(game: GameConfig, opponents: list[str]) -> None:
    """Makes each of `run.eval_opponents` once, so that a run refuses at its start, in one
    line, an opponent its first evaluation could not make (a game that is not a board game,
    `perfect` on a game too large to solve).

    Raises:
      EnvironmentSpecError: naming the entry of `run.eval_opponents` to blame.
    """
    for i, name in enumerate(opponents):
        try:
            make_opponent(name, board_game(game).game, seed=0)
        except OpponentError as error:
            raise EnvironmentSpecError(str(error), key=f"run.eval_opponents[{i}]") from None


class PerfectPlayer:
    """Exact play: every legal move's game-theoretic value by negamax over all positions,
    memoised by (board, player to move); uniform among the best moves."""

    def __init__(self, game, rng: np.random.Generator):
        self.rng = rng
        self.values: dict[str, dict[int, float]] = {}
        self.solve(game.new_initial_state())

    def solve(self, state) -> float:
        """The value of `state` for the player to move there; fills `self.values`."""
        key = f"{state.current_player()}|{state}"
        if key in self.values:
            return max(self.values[key].values())
        if len(self.values) >= PERFECT_PLAY_LIMIT:
            raise OpponentError(
                f"perfect: the game has more than {PERFECT_PLAY_LIMIT:,} positions; too large to "
                "solve exactly (use mcts:N)"
            )
        player, moves = state.current_player(), {}
        for action in state.legal_actions():
            child = state.child(action)
            moves[int(action)] = child.player_return(player) if child.is_terminal() else -self.solve(child)
        self.values[key] = moves
        return max(moves.values())

    def optimal_actions(self, state) -> list[int]:
        self.solve(state)
        moves = self.values[f"{state.current_player()}|{state}"]
        best = max(moves.values())
        return [action for action, value in moves.items() if value == best]

    def __call__(self, state) -> int:
        return int(self.rng.choice(self.optimal_actions(state)))


@dataclasses.dataclass
class MatchResult:
    """Outcomes from MuZero's side: counts[side][outcome], side "first"/"second", outcome "win"/"draw"/"loss"."""

    counts: dict[str, dict[str, int]]
    # Per game, in play order: (MuZero's side, its outcome, the game's actions from the start).
    records: list[tuple[str, str, list[int]]] = dataclasses.field(default_factory=list)

    def total(self, outcome: str) -> int:
        return sum(side[outcome] for side in self.counts.values())

    def games(self) -> int:
        return sum(sum(side.values()) for side in self.counts.values())

    def fraction(self, outcome: str) -> float:
        return self.total(outcome) / max(self.games(), 1)

    def score(self) -> float:
        """Win 1, draw 0.5, loss 0, as a fraction of the games."""
        return (self.total("win") + 0.5 * self.total("draw")) / max(self.games(), 1)

    def rows(self, opponent: str) -> list[list]:
        """CSV rows: opponent, side, games, win, draw, loss."""
        return [[opponent, side, sum(c.values()), c["win"], c["draw"], c["loss"]] for side, c in self.counts.items()]


def play_match(
    game_config: GameConfig,
    player: GreedyPlayer,
    network: Network,
    opponent_name: str,
    games: int,
    seed: int = 0,
) -> MatchResult:
    """`games` games of MuZero against the opponent, the first half with MuZero moving first,
    played side by side (see the module's docstring).

    Args:
      game_config: the `game` section (an OpenSpiel board game; max_moves).
      player: MuZero's greedy moves, made for `games` games at once
        (`muzero.greedy.make_greedy_player`; kept by callers that play many matches).
      network: as self-play runs it (a resnet's `PublishedWeights` need the compiled search).
      opponent_name: "random", "perfect" or "mcts:N" (`make_opponent`).
    """
    environments = [board_game(game_config, seed) for _ in range(games)]
    opponent = make_opponent(opponent_name, environments[0].game, seed)
    sides = [0 if index < (games + 1) // 2 else 1 for index in range(games)]
    matches = [
        Game(game_config.action_space_size, game_config.discount, environment, game_config.stacked_frames)
        for environment in environments
    ]

    def over(game: Game) -> bool:
        return game.terminal() or len(game.history) >= game_config.max_moves

    while True:
        for game, side in zip(matches, sides):  # the opponent's moves, up to MuZero's turn
            while not over(game) and game.to_play() != side:
                game.apply(opponent(game.environment.state))
        waiting = [game for game in matches if not over(game)]
        if not waiting:
            break
        for game, action in zip(waiting, player.moves(network, waiting)):
            game.apply(action)
    result = MatchResult({side: {"win": 0, "draw": 0, "loss": 0} for side in ("first", "second")})
    for environment, side in zip(environments, sides):
        outcome = environment.state.player_return(side) if environment.state.is_terminal() else 0.0
        side_name, outcome_name = (
            "first" if side == 0 else "second",
            "win" if outcome > 0 else "loss" if outcome < 0 else "draw",
        )
        result.counts[side_name][outcome_name] += 1
        result.records.append((side_name, outcome_name, [int(action) for action in environment.state.history()]))
    return result


def game_frames(game_config: GameConfig, actions: list[int]) -> list[np.ndarray]:
    """The board after each move of a game, as pictures (`OpenSpielEnvironment.frame`): the
    empty board, then one frame a move (len(actions) + 1 frames of uint8 [H, W, 3]).

    Raises:
      ValueError: the game cannot draw itself (its stone planes are not known).
    """
    environment = board_game(game_config)
    environment.reset()
    frames = [environment.frame()]
    for action in actions:
        environment.step(action)
        frames.append(environment.frame())
    return frames


def check_match_videos(environment: OpenSpielEnvironment, directory: Path) -> None:
    """Whether `save_match_videos` can draw this game into `directory`, before a match is played.

    Raises:
      VideoUnavailable: the board cannot be drawn (its stone planes are not known), no encoder
        is installed, or `directory` already holds a match's videos (the new ones would mix
        with them); one line.
    """
    try:
        environment.frame()
    except ValueError as error:
        raise VideoUnavailable(str(error)) from None
    video_suffix(gif_first=True)
    if directory.is_dir() and any(directory.glob("game-*")):
        raise VideoUnavailable(f"{directory} already holds the videos of a match (game-*); give an empty directory")


def save_match_videos(result: MatchResult, game_config: GameConfig, directory: Path) -> list[Path]:
    """One video per game of a match, DIRECTORY/game-<i>-<side>-<outcome>.gif (i from 1, in
    play order; .mp4 without Pillow, `muzero.video.video_suffix`): `BOARD_FPS` moves a second,
    the final position held `HOLD_SECONDS` seconds more.

    Returns:
      The paths written, in play order.

    Raises:
      VideoUnavailable: no encoder, or OpenCV cannot write here.
      OSError: a file cannot be written.
    """
    suffix, paths = video_suffix(gif_first=True), []
    for index, (side, outcome, actions) in enumerate(result.records, start=1):
        frames = game_frames(game_config, actions)
        frames += [frames[-1]] * round(HOLD_SECONDS * BOARD_FPS)
        paths.append(write_video(frames, directory / f"game-{index:03d}-{side}-{outcome}{suffix}", BOARD_FPS))
    return paths
