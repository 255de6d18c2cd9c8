"""How a trained run's moves are chosen from its searches: ties at the top, and what other rules score.

    python scripts/probe_greedy.py --run runs/freeway_500k [--episodes 8] [--moves 1000] \\
        [--rules larger random_ties temperature:0.25 noise selfplay prior] [--simulations 50]

Plays `--episodes` games side by side with the run's newest complete checkpoint (read once,
so every rule plays the same network) and the run's own batched search (`make_run_searcher`;
`--simulations` replaces its budget), once for each rule, on the same environment seeds. Each
rule but `prior` picks the move from a root's visit counts:

* `larger`: the most visited action, ties to the larger action. This is evaluation's rule
  (`softmax_sample` at temperature 0: the pseudocode's `max` over (count, action) pairs).
* `random_ties`: the most visited action, ties drawn uniformly among the tied ones.
* `temperature:T`: sampled with probability proportional to N^(1/T), no root noise.
* `noise`: self-play's exploration noise at the root, then the most visited (ties larger).
* `selfplay`: as self-play at the checkpoint's training step: the root's exploration noise,
  then sampled at the config's temperature (`search.visit_softmax_temperature`).
* `prior`: the largest of the network's prior over the legal actions (ties larger), not the
  search's counts (the search still runs, for the tie statistics).

Per rule it prints the mean return (and its standard deviation over the episodes), each
action's share of the moves played, the network's mean prior for each action at the positions
played (`initial_inference`'s policy, softmax over the legal actions: `policy_priors`), how
often the move played is one of the prior's largest (a prior tied at the top, as an untrained
network's uniform one, counts every tied action as its largest), the share of searches whose
largest visit count was shared by two or more actions, and how often `larger` would pick each
action at such a tie.
A game is cut after `--moves` moves (Freeway's timer ends it at 2,500); the return counts the
rewards until then. Why: greedy play takes the most visited action of a noiseless search, and
where it scores far below self-play's noised, sampled moves, the rules tell apart what it
misses: a tie rule, the noise, the sampling or the budget. docs/sample_efficiency_freeway.md and
docs/sample_efficiency_space_invaders.md quote it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RULES = ("larger", "random_ties", "noise", "selfplay", "prior")


def pick(counts: np.ndarray, legal: np.ndarray, rule: str, temperature: float, rng: np.random.Generator) -> int:
    """The move a rule picks from one root's visit counts [A] over its legal actions [A] bool.

    Why: `larger` is evaluation's own choice; the others tell whether its tie rule or the
    absence of sampling is what greedy play pays for. Every rule but `random_ties` is
    self-play's and evaluation's own `softmax_sample` (`larger`: at temperature 0).
    """
    from muzero.search.reference import softmax_sample

    legal_actions = np.flatnonzero(legal)
    if rule == "random_ties":
        visits = counts[legal_actions]
        return int(rng.choice(legal_actions[visits == visits.max()]))
    pairs = [(int(counts[a]), int(a)) for a in legal_actions]  # as `muzero.selfplay.legal_visits`
    return softmax_sample(pairs, 0.0 if rule == "larger" else temperature, rng)


def tie_counts(counts: np.ndarray, legal: np.ndarray) -> tuple[bool, int]:
    """(whether the largest visit count over the legal actions is shared, the action `larger` takes).
    The `prior` rule takes the same over the prior [A]: its largest, ties to the larger action."""
    legal_actions = np.flatnonzero(legal)
    visits = counts[legal_actions]
    top = legal_actions[visits == visits.max()]
    return len(top) > 1, int(top[-1])


def positive(text: str) -> bool:
    """Whether `text` reads as a number above 0 (a temperature)."""
    try:
        return float(text) > 0
    except ValueError:
        return False


def load(run_dir: Path, simulations: int | None) -> tuple:
    """(config, spec, network as self-play runs it, training step) of the run's newest checkpoint."""
    from muzero.evaluation import load_run

    loaded = load_run(run_dir, simulations)
    if loaded[0].search.algorithm == "gumbel":  # Gumbel MuZero picks its own move, not from the counts
        raise ValueError(f"{run_dir}: search.algorithm is gumbel; this probe reads pUCT's visit counts")
    return loaded


def play(loaded: tuple, rule: str, episodes: int, moves: int, seed: int) -> dict:
    """Plays `episodes` games of at most `moves` moves under `rule` with `loaded` (`load`); returns
    their statistics: "returns" [episodes], "played" [A] moves per action, "prior" [A] the summed
    legal prior at the positions played, "prior_agrees" (moves that are one of the prior's
    largest), "searches", "ties" (searches whose top count was shared) and "tie_picks" [A] (the
    action `larger` takes at those ties)."""
    from muzero.config import visit_softmax_temperature
    from muzero.envs import make_environments
    from muzero.factories import make_run_searcher
    from muzero.game import Game
    from muzero.search.reference import policy_priors
    from muzero.selfplay import search_games

    config, spec, network, step = loaded
    moves = min(moves, config.game.max_moves)  # evaluation's games stop there too
    searcher = make_run_searcher(config, spec, episodes)
    bound = searcher.bind(network)
    environments = make_environments(config.game, episodes, seed)
    g = config.game
    games = [Game(g.action_space_size, g.discount, env, g.stacked_frames) for env in environments]
    rng = np.random.default_rng(seed)
    actions = g.action_space_size
    stats = {
        "played": np.zeros(actions, np.int64),
        "tie_picks": np.zeros(actions, np.int64),
        "prior": np.zeros(actions),
        "searches": 0,
        "ties": 0,
        "prior_agrees": 0,
    }
    rewards = np.zeros(episodes)
    open_rows = list(range(episodes))
    for _ in range(moves):
        live = [games[i] for i in open_rows]
        noise_rng = rng if rule in ("noise", "selfplay") else None
        result, legal = search_games(searcher, bound, live, noise_rng, config.search)
        logits = np.asarray(bound.initial_inference(np.stack([game.make_image(-1) for game in live])).policy_logits)
        prior = policy_priors(logits, legal)  # [B, A], the priors the search's root children get
        for row, (i, game) in enumerate(zip(open_rows, live)):
            counts = result.visit_counts[row]
            tied, larger = tie_counts(counts, legal[row])
            stats["searches"] += 1
            if tied:
                stats["ties"] += 1
                stats["tie_picks"][larger] += 1
            if rule == "selfplay":
                temperature = visit_softmax_temperature(
                    config.search.visit_softmax_temperature, len(game.history), step
                )
                action = pick(counts, legal[row], "temperature", temperature, rng)  # 0: the most visited
            elif rule.startswith("temperature:"):
                action = pick(counts, legal[row], "temperature", float(rule.split(":")[1]), rng)
            elif rule == "prior":
                action = tie_counts(prior[row], legal[row])[1]  # the prior's largest, ties larger
            else:  # larger, random_ties; noise: the noised search's most visited, ties larger
                action = pick(counts, legal[row], "larger" if rule == "noise" else rule, 0.0, rng)
            stats["prior"] += prior[row]
            stats["prior_agrees"] += int(prior[row, action] == prior[row].max())
            game.apply(action)
            stats["played"][action] += 1
            rewards[i] += game.rewards[-1]
        open_rows = [i for i in open_rows if not games[i].terminal()]
        if not open_rows:
            break
    return {**stats, "returns": rewards, "step": step}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="a run folder with a complete checkpoint")
    parser.add_argument("--episodes", type=int, default=8, help="games played side by side per rule")
    parser.add_argument("--moves", type=int, default=1000, help="moves per game at most")
    parser.add_argument(
        "--rules", nargs="+", default=list(RULES), help="larger, random_ties, temperature:T, noise, selfplay, prior"
    )
    parser.add_argument("--simulations", type=int, help="simulations per search (default: the run's)")
    parser.add_argument("--seed", type=int, default=12345, help="environment and sampling seed (evaluation's)")
    args = parser.parse_args(argv)
    for name in ("episodes", "moves", "simulations"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name}: expected at least 1, got {getattr(args, name)}")
    for rule in args.rules:
        if rule not in RULES and not (rule.startswith("temperature:") and positive(rule.split(":", 1)[1])):
            parser.error(
                f"--rules: unknown rule {rule!r} (larger, random_ties, temperature:T with T > 0, noise, selfplay, prior)"
            )
    sys.path.insert(0, str(ROOT))
    from muzero.tf_runtime import load_tensorflow

    load_tensorflow()
    from muzero.checkpoints import CheckpointError
    from muzero.config_io import ConfigError

    try:
        loaded = load(args.run, args.simulations)
    except (CheckpointError, ConfigError, ValueError) as error:  # each names its file
        parser.error(str(error))
    print(f"{args.run}: {loaded[0].search.num_simulations} simulations a search", flush=True)
    for rule in args.rules:
        s = play(loaded, rule, args.episodes, args.moves, args.seed)
        played = s["played"] / max(s["played"].sum(), 1)
        picks = s["tie_picks"] / max(s["ties"], 1)
        print(
            f"{rule} (checkpoint at step {s['step']}): return {s['returns'].mean():.2f} "
            f"(std {s['returns'].std():.2f}, {len(s['returns'])} games) | moves per action "
            + " / ".join(f"{p:.3f}" for p in played)
            + " | mean prior "
            + " / ".join(f"{p:.3f}" for p in s["prior"] / max(s["searches"], 1))
            + f" | the prior's largest in {s['prior_agrees'] / max(s['searches'], 1):.3f}"
            + f" | top count tied in {s['ties'] / max(s['searches'], 1):.3f} of {s['searches']} searches;"
            " `larger` picks there " + " / ".join(f"{p:.3f}" for p in picks),
            flush=True,
        )


if __name__ == "__main__":
    main()
