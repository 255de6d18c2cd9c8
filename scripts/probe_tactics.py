"""Does a board-game run see one move ahead? Its moves where a game is won or lost at once.

    python scripts/probe_tactics.py --run runs/c4_2h/connect4_seed0 [--positions 300] [--opponents mcts:200]

Positions come from uniformly random games of the run's OpenSpiel game (`--seed`), or with
`--from-replay` from the run's own self-play games (the replay saved with its checkpoint, newest
first), and two kinds are kept, up to `--positions` of each:

* **win**: the player to move has a move that wins the game at once; right: one of them;
* **defend**: no such move, but some moves let the opponent win at its next move and others
  do not (a line of three to block, or a square not to play under it); right: a move after
  which the opponent cannot win at once. Positions where every move loses so are left out.

Each player below chooses a move in every kept position, and the table gives the share of right
moves: the run's greedy search (`muzero evaluate`'s, at `--simulations` or the run's budget),
its network's prior alone (the most likely legal move of the representation's policy, no
search), each of `--opponents` (`muzero.arena.make_opponent`: OpenSpiel's MCTS bot with random
rollouts, which plays such moves through its rollouts and proven wins), and a uniformly random
legal move (the exact expectation, not a sample: right moves / legal moves, averaged). A
perfect player need not score 1: in a position won or lost anyway, a move that keeps that
value is as good as the quick win or the block.

A second table says why, from the run's network one move ahead (`one_step`): the reward it
predicts for the right moves and for the others, and the value it gives the position after
them, from the opponent's side. A search that misses what a 200-rollout MCTS sees tells where
a match against it is lost: in the model's next move, not in long plans. docs/boardgames.md
quotes it for connect four.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("win", "defend")


def winning_moves(state) -> list[int]:
    """The legal moves of the player to move that end the game with that player's win."""
    mover, wins = state.current_player(), []
    for action in state.legal_actions():
        child = state.child(action)
        if child.is_terminal() and child.player_return(mover) > 0:
            wins.append(action)
    return wins


def safe_moves(state) -> list[int]:
    """The legal moves after which the opponent has no move that wins at once (a move that ends
    the game is safe)."""
    return [
        action
        for action in state.legal_actions()
        if (child := state.child(action)).is_terminal() or not winning_moves(child)
    ]


def classify(state) -> tuple[str, list[int]] | None:
    """("win", winning moves), ("defend", safe moves), or None for a position with neither
    lesson (no win, and every move safe or none)."""
    wins = winning_moves(state)
    if wins:
        return "win", wins
    safe = safe_moves(state)
    if 0 < len(safe) < len(state.legal_actions()):
        return "defend", safe
    return None


def collect_positions(
    game, positions: int, seed: int, played: list[list[int]] | None = None, max_games: int = 100_000
) -> dict[str, list]:
    """{kind: [(moves from the start, right moves, legal moves)]}, up to `positions` of each kind;
    every non-terminal position of each game is classified. The games: `played` (each a list of
    moves from the start, walked in order), or uniformly random ones drawn with `seed`."""
    rng = np.random.default_rng(seed)
    found: dict[str, list] = {kind: [] for kind in KINDS}
    games = iter(played) if played is not None else None
    for _ in range(max_games):
        script = next(games, None) if games is not None else None
        if all(len(found[kind]) >= positions for kind in KINDS) or (games is not None and script is None):
            break
        state, moves = game.new_initial_state(), []
        while not state.is_terminal() and (script is None or len(moves) < len(script)):
            kept = classify(state)
            if kept is not None and len(found[kept[0]]) < positions:
                found[kept[0]].append((list(moves), kept[1], state.legal_actions()))
            action = int(rng.choice(state.legal_actions())) if script is None else int(script[len(moves)])
            state.apply_action(action)
            moves.append(action)
    return found


def random_share(rows: list) -> float:
    """The expected share of right moves of a uniformly random legal move."""
    return float(np.mean([len(right) / len(legal) for _, right, legal in rows])) if rows else float("nan")


def one_step(network, observations: np.ndarray, rows: list) -> dict[str, float]:
    """The model one move ahead of `rows`' positions: the mean predicted reward of the right
    moves and of the other legal ones, and the mean value after them (the next mover's, that is
    the opponent's, view). A model that saw the position would say reward 1 for a win and 0
    otherwise, and a value near 1 for the opponent after a move that lets it win at once."""
    root = network.initial_inference(observations, training=False)
    sums = {"reward, right": [], "reward, other": [], "value after, right": [], "value after, other": []}
    for action in range(np.asarray(root.policy_logits).shape[1]):
        actions = np.full(len(rows), action, np.int32)
        output = network.recurrent_inference(root.hidden_state, actions, training=False)
        reward, value = np.asarray(output.reward).reshape(-1), np.asarray(output.value).reshape(-1)
        for i, (_, right, legal) in enumerate(rows):
            if action in legal:
                side = "right" if action in right else "other"
                sums[f"reward, {side}"].append(reward[i])
                sums[f"value after, {side}"].append(value[i])
    return {name: float(np.mean(values)) if values else float("nan") for name, values in sums.items()}


def prior_moves(network, observations: np.ndarray, rows: list) -> list[int]:
    """The most likely legal move of the representation's policy in each of `rows`' positions."""
    logits = np.asarray(network.initial_inference(observations, training=False).policy_logits)
    masked = np.full_like(logits, -np.inf)
    for i, (_, _, legal) in enumerate(rows):
        masked[i, legal] = logits[i, legal]
    return [int(action) for action in masked.argmax(axis=1)]


def probe(
    run_dir: Path, positions: int, seed: int, simulations: int | None, opponents: list[str], from_replay: bool = False
) -> tuple[int, dict, dict]:
    """(training step, {player: {kind: share of right moves}} with `collect_positions`'s counts
    under the key "positions", {kind: `one_step`}); `from_replay`: the positions of the
    checkpoint's replay, newest games first, instead of random games."""
    from muzero.arena import board_game, make_opponent
    from muzero.evaluation import restore_run
    from muzero.factories import make_replay_buffer
    from muzero.game import Game
    from muzero.greedy import make_greedy_player

    # The Keras network for the prior and the model (a resnet's published weights run only in
    # the search), published for the search, from one restore.
    config, spec, network, step, state = restore_run(run_dir, simulations)
    published = network.published_network(step)
    played = None
    if from_replay:
        replay = make_replay_buffer(config, spec, np.random.default_rng(seed))
        replay.load_state_dict(state["replay"])
        played = [list(game.history) for game in reversed(replay.games)]
    del state
    rules = config.game
    found = collect_positions(board_game(rules, seed).game, positions, seed, played)
    table: dict[str, dict] = {"positions": {kind: len(rows) for kind, rows in found.items()}}
    table.update({name: {} for name in ("search", "prior", *opponents, "random")})
    model = {}
    for kind, rows in found.items():
        games = []
        for moves, _, _ in rows:
            games.append(Game(rules.action_space_size, rules.discount, board_game(rules, seed), rules.stacked_frames))
            for action in moves:
                games[-1].apply(action)
        chosen = {name: [] for name in ("search", "prior", *opponents)}
        if games:
            observations = np.stack([game.make_image(-1) for game in games])
            chosen["search"] = make_greedy_player(config, spec, len(games)).moves(published, games)
            chosen["prior"] = prior_moves(network, observations, rows)
            model[kind] = one_step(network, observations, rows)
        for opponent in opponents:
            bot = make_opponent(opponent, board_game(rules, seed).game, seed)
            chosen[opponent] = [bot(game.environment.state.clone()) for game in games]
        for name, moves in chosen.items():
            right = [move in row[1] for move, row in zip(moves, rows)]
            table[name][kind] = float(np.mean(right)) if right else float("nan")
        table["random"][kind] = random_share(rows)
    return step, table, model


def check_run(run_dir: Path, opponents: list[str], from_replay: bool, error) -> None:
    """Before TensorFlow loads: `error` (one line, exit 2) for a run folder without a readable
    config, of a game that is not an OpenSpiel board game, an opponent that cannot be made, or
    replay segments asked for as whole games."""
    from muzero.arena import board_game, check_opponents
    from muzero.config_loader import load_config
    from muzero.run_dir import CONFIG_FILE

    try:
        config = load_config(run_dir / CONFIG_FILE)
        board_game(config.game)
        check_opponents(config.game, opponents)
    except ValueError as problem:  # ConfigError, OpponentError, EnvironmentSpecError: each says what
        error(str(problem))
    if from_replay and config.selfplay.segment_length:
        error(f"{run_dir}: selfplay.segment_length is set; --from-replay walks whole games from their start")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="a board-game run folder with a complete checkpoint")
    parser.add_argument("--positions", type=int, default=300, help="positions of each kind")
    parser.add_argument("--seed", type=int, default=0, help="draws the random games")
    parser.add_argument("--simulations", type=int, default=None, help="the search's budget (default: the run's)")
    parser.add_argument("--opponents", nargs="*", default=["mcts:200"], help="yardsticks (muzero evaluate's names)")
    parser.add_argument(
        "--from-replay", action="store_true", help="the run's own self-play positions, not random games"
    )
    args = parser.parse_args(argv)
    for name in ("positions", "simulations"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name}: expected at least 1, got {getattr(args, name)}")
    sys.path.insert(0, str(ROOT))
    check_run(args.run, args.opponents, args.from_replay, parser.error)
    from muzero.checkpoints import CheckpointError

    try:
        step, table, model = probe(
            args.run, args.positions, args.seed, args.simulations, args.opponents, args.from_replay
        )
    except CheckpointError as error:  # names its file
        parser.error(str(error))
    counts = table.pop("positions")
    source = "its replay's games, newest first" if args.from_replay else f"random games, seed {args.seed}"
    print(f"{args.run} at training step {step}: share of right moves (positions from {source})")
    print("| player | " + " | ".join(f"{kind} ({counts[kind]} positions)" for kind in KINDS) + " |")
    print("| --- " * (len(KINDS) + 1) + "|")
    for name, shares in table.items():
        label = {"search": "the run's search", "prior": "its prior alone", "random": "random (expected)"}.get(
            name, name
        )
        print(f"| {label} | " + " | ".join(f"{shares[kind]:.3f}" for kind in KINDS) + " |")
    print()
    print("The model one move ahead (means over the positions' legal moves; values from the opponent's side):")
    names = list(next(iter(model.values()))) if model else []
    print("| positions | " + " | ".join(names) + " |")
    print("| --- " * (len(names) + 1) + "|")
    for kind, means in model.items():
        print(f"| {kind} | " + " | ".join(f"{means[name]:.3f}" for name in names) + " |")


if __name__ == "__main__":
    main()
