"""What self-play did, slice by slice of a run's replay: the moves it chose and the searches behind them.

    python scripts/probe_actions.py --run runs/freeway_500k [--slices 5]

Reads the replay buffer saved with the run's newest complete checkpoint (no network) and cuts
its games, oldest first, into `--slices` runs of consecutive games. For each slice: its games
and moves, the mean return of its games, the share of each action among the moves played,
each action's mean share of the root's policy targets (`child_visits`: the visit shares
of pUCT, Gumbel's improved policy), and the mean of the searches' root values (what value
targets bootstrap from without Reanalyse; in two-player games, each from its mover's side).
Where the returns stand still, the shares show whether self-play explored: moves spread over
the actions as a random policy's would, or drawn to a few of them; and root values far from
the returns show values the network made up. docs/sample_efficiency_freeway.md quotes it for Freeway.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def action_rows(games: list, action_space_size: int, slices: int) -> list[dict]:
    """One row per slice of `games`, consecutive runs of them as `np.array_split` cuts them.

    Args:
      games: stored games (`muzero.game.Game`: `history`, `rewards`, `child_visits`,
        `root_values`), oldest first.
      action_space_size: the game's actions.
      slices: how many runs of games (one per game when there are fewer games).

    Returns:
      Per slice: "games" (its first and last index), "moves", "return" (mean over its games),
      "played" [action_space_size] (each action's share of the moves), "visits"
      [action_space_size] (each action's mean share of the root's policy targets) and
      "root value" (the mean over its moves).
    """
    rows = []
    for part in np.array_split(np.arange(len(games)), min(slices, len(games))):
        chosen = [games[i] for i in part]
        actions = np.concatenate([np.asarray(game.history, dtype=np.int64) for game in chosen])
        visits = np.concatenate([np.asarray(game.child_visits, dtype=np.float64) for game in chosen])
        rows.append(
            {
                "games": (int(part[0]), int(part[-1])),
                "moves": len(actions),
                "return": float(np.mean([sum(game.rewards) for game in chosen])),
                "played": np.bincount(actions, minlength=action_space_size) / len(actions),
                "visits": visits.mean(axis=0),
                "root value": float(np.mean(np.concatenate([game.root_values for game in chosen]))),
            }
        )
    return rows


def read_games(run_dir: Path) -> tuple[int, list, int]:
    """(training step of the newest complete checkpoint, its replay's games, the game's actions).

    Raises:
      ValueError: no complete checkpoint, an unreadable state file, split games
        (`selfplay.segment_length`: their returns are not the games'), or no game in replay.
    """
    from muzero.checkpoints import load_pickle
    from muzero.config_loader import load_config
    from muzero.run_dir import CHECKPOINT_DIR, CONFIG_FILE, complete_steps

    steps = complete_steps(run_dir / CHECKPOINT_DIR)
    if not steps:
        raise ValueError(f"{run_dir}: no complete checkpoint")
    config = load_config(run_dir / CONFIG_FILE)
    if config.selfplay.segment_length:
        raise ValueError(f"{run_dir}: selfplay.segment_length is set; this probe reads whole games")
    path = run_dir / CHECKPOINT_DIR / f"state-{steps[0]}.pkl"
    try:
        with open(path, "rb") as f:
            games = load_pickle(f)["replay"]["games"]
    except (OSError, EOFError, pickle.UnpicklingError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a readable checkpoint state ({error})") from error
    if not games:
        raise ValueError(f"{run_dir}: the checkpoint's replay holds no game")
    return steps[0], games, config.game.action_space_size


def main(argv: list[str] | None = None) -> None:
    """Prints the table of `action_rows` for `--run`; bad input: one line and status 2."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="a run folder with a complete checkpoint")
    parser.add_argument("--slices", type=int, default=5, help="runs of consecutive games, oldest first")
    args = parser.parse_args(argv)
    if args.slices < 1:
        parser.error(f"--slices: expected at least 1, got {args.slices}")
    sys.path.insert(0, str(ROOT))
    try:
        step, games, actions = read_games(args.run)
    except ValueError as error:
        parser.error(str(error))
    print(f"{args.run} at training step {step}: {len(games)} games in replay, oldest first")
    names = (
        " | ".join(f"played {a}" for a in range(actions)) + " | " + " | ".join(f"visits {a}" for a in range(actions))
    )
    print(f"| games | moves | mean return | {names} | root value |")
    print("| --- " * (4 + 2 * actions) + "|")
    for row in action_rows(games, actions, args.slices):
        shares = " | ".join(f"{x:.3f}" for x in (*row["played"], *row["visits"]))
        first, last = row["games"]
        print(f"| {first}-{last} | {row['moves']:,} | {row['return']:.2f} | {shares} | {row['root value']:.3f} |")


if __name__ == "__main__":
    main()
