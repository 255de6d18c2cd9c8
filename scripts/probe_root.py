"""What an untrained network's search prefers: self-play's first moves with fresh networks.

    python scripts/probe_root.py --config configs/minatar/freeway.yaml --networks 6 --moves 40 \\
        --set search.algorithm=puct [--set search.count_root_evaluation=true]

For each of `--networks` freshly initialised networks (seeds 0, 1, ... as `run.seed` seeds a run), plays
`--moves` self-play moves of one game (environment seed: the network's) with the reference
search as self-play runs it at training step 0: Dirichlet noise at the root, the move sampled
from the visit counts at the config's temperature. It prints, per action, summed over all
searches:

* the share of searches whose **first simulation** went to it (a copy of the noised root
  searched with one simulation): with the pseudocode's root (visit count 0) every first
  simulation goes to the largest action, whatever the priors; with
  `search.count_root_evaluation` the noised prior picks it;
* its share of the root's visits (the policy targets the warm-up stores);
* its share of the moves played;
* the spread over networks of its share of each network's root visits (min / median / max):
  each untrained network makes up its own values, so one can lean where the mean does not.

`selfplay.random_opening_moves` and `random_moves_before_step` are not applied: every move is
the search's. An untrained network knows nothing, so a share far from uniform is the search's
own lean. docs/sample_efficiency_freeway.md quotes it for Freeway, whose largest action is *down*.
"""

from __future__ import annotations

import argparse
import copy
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def probe(config, networks: int, moves: int) -> dict[str, np.ndarray]:
    """Counts per action over `networks` fresh networks' games of at most `moves` moves.

    Returns:
      "first" [A] searches whose first simulation took each action, "played" [A] moves played,
      "per_network" [networks, A] each network's root visits.
    """
    from muzero.envs import make_environment
    from muzero.envs.base import EnvironmentSpec
    from muzero.factories import make_run_network
    from muzero.game import Game
    from muzero.run_state import seed_everything
    from muzero.search.reference import Node, add_exploration_noise, expand_node, run_mcts, select_action

    actions = config.action_space_size
    counts = {name: np.zeros(actions, np.int64) for name in ("first", "played")}
    one_simulation = replace(config, search=replace(config.search, num_simulations=1))
    rng = np.random.default_rng(0)
    per_network = np.zeros((networks, actions), np.int64)
    for seed in range(networks):
        environment = make_environment(config.game, seed=seed)
        seed_everything(seed)  # as a run seeds itself (run.seed), so network `seed` is a run's
        network = make_run_network(config, EnvironmentSpec.of(environment))
        game = Game(actions, config.discount, environment, config.game.stacked_frames)
        while not game.terminal() and len(game.history) < moves:
            root = Node(0)
            output = network.initial_inference(game.make_image(-1)[None]).item(0)
            expand_node(root, game.to_play(), game.legal_actions(), output)
            add_exploration_noise(config, root, rng)
            first = copy.deepcopy(root)
            run_mcts(one_simulation, first, game.action_history(), network)
            counts["first"] += [first.children[a].visit_count if a in first.children else 0 for a in range(actions)]
            run_mcts(config, root, game.action_history(), network)
            per_network[seed] += [root.children[a].visit_count if a in root.children else 0 for a in range(actions)]
            action = select_action(config, len(game.history), root, 0, rng)
            counts["played"][action] += 1
            game.apply(action)
        environment.close()
    counts["per_network"] = per_network
    return counts


def table(counts: dict[str, np.ndarray]) -> str:
    """The shares of `probe`'s counts as a Markdown table, one row per action."""
    totals = {"first": counts["first"], "visits": counts["per_network"].sum(axis=0), "played": counts["played"]}
    shares = {name: total / max(total.sum(), 1) for name, total in totals.items()}
    per_network = counts["per_network"] / np.maximum(counts["per_network"].sum(axis=1, keepdims=True), 1)
    lines = [
        "| action | first simulation | root visits | moves played | root visits per network: min / median / max |",
        "| --- | --- | --- | --- | --- |",
    ]
    for action in range(len(counts["played"])):
        spread = " / ".join(f"{x:.3f}" for x in np.percentile(per_network[:, action], [0, 50, 100]))
        lines.append(
            f"| {action} | {shares['first'][action]:.3f} | {shares['visits'][action]:.3f} "
            f"| {shares['played'][action]:.3f} | {spread} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Prints `table` for `--config`; bad input: one line and status 2."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="a YAML config")
    parser.add_argument("--networks", type=int, default=6, help="fresh networks, one game each")
    parser.add_argument("--moves", type=int, default=40, help="moves of each game")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config overrides")
    args = parser.parse_args(argv)
    for name in ("networks", "moves"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}: expected at least 1, got {getattr(args, name)}")
    sys.path.insert(0, str(ROOT))
    from muzero.config_io import ConfigError
    from muzero.config_loader import load_config
    from muzero.envs import EnvironmentSpecError

    try:
        config = load_config(args.config, args.set)
    except (ConfigError, OSError) as error:
        parser.error(str(error))
    if config.search.algorithm != "puct":
        parser.error("search.algorithm: this probe runs the pUCT search")
    try:
        counts = probe(config, args.networks, args.moves)
    except EnvironmentSpecError as error:  # the game cannot be made (a missing extra, bad kwargs)
        parser.error(f"{error.key}: {error}")
    print(
        f"{args.config}: {args.networks} untrained networks, {int(counts['played'].sum())} searches of "
        f"{config.search.num_simulations} simulations (count_root_evaluation: {config.search.count_root_evaluation})"
    )
    print(table(counts))


if __name__ == "__main__":
    main()
