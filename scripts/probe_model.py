"""How far a run's model strays from the real game along the paths it imagines, depth by depth.

    python scripts/probe_model.py --run runs/cp_X/seed-1 [--step 3500] [--episodes 8] \\
        [--every 10] [--depth 20] [--near 10]

Plays `--episodes` games with the run's checkpoint and its own batched search, greedily
(evaluation's rule: the most visited action, ties to the larger), and copies the real
environment at every `--every`-th position played. From each copy (a root) and each legal
action a, two paths take the same actions:

* the real game takes a, then the policy head's largest action on each real observation (no
  search), until the game ends, or is cut at `game.max_moves` moves from its start (or by the
  environment's own time limit);
* the model unrolls those actions from the root's hidden state (the dynamics, `--depth` steps).

At each depth k (the state after k actions; k = 0 is the root) it compares the model's value
with the real discounted return from that state to the end of the path (0 once the game has
ended; a path cut by the time limit counts as ended, as training's targets count it without
`game.bootstrap_truncated`), separately for the action the search played at the root and
for the others: their means, the squared error, and the same means over the states whose
real game ends within `--near` moves, a cut not counted, since an observation need not show
how many moves are left (does the model see the end coming?). At the root it
counts how often the model's Q(a) = r_1 + discount v_1 picks the action whose real path returns
most, over the roots where the real returns' spread exceeds 1 (the model's ties to the larger
action, as the search's). Where the search's move differs from the policy head's largest
(ties to the larger), it compares their real paths' returns: the head's is the head's own
play (ties aside: the paths take the first of tied actions), the search's one move off it. It
prints each greedy game's length and, for observations of at most 16 numbers, its last
observation (CartPole's: cart position, its velocity, pole angle, its velocity: how the game
ended). And it searches each root once more with the reference search (greedy, the run's
budget) to say how deep the search's tree goes: the deepest node it visits, and the mean depth
its simulations reach, against training's K.

The real paths follow the policy head, not the search, so their returns are those of a
weaker player than the one the search assumes; near an end, both fall. Why: inside one of
CartPole's dips after solving, the more the search looks ahead, the worse it plays
(docs/reanalyse.md), while the value head fits the stored positions along the actions
played; this reads the model where training's unrolls do not reach: the actions not played,
and deeper than K. Only one-player games with one frame per observation and every action
legal (CartPole, MinAtar), whose environments copy with their state (`copy.deepcopy`).
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ("states", "real", "model", "sq. error", "near the end", "real near", "model near")


def returns_to_go(rewards: np.ndarray, lengths: np.ndarray, discount: float) -> np.ndarray:
    """The discounted return from each state of each path to its end.

    Args:
      rewards: [N, T] the reward of each path's t-th action (0 after its end).
      lengths: [N] the number of actions each path took before it ended.
      discount: the game's discount.

    Returns:
      [N, T + 1] z_k = sum over t >= k of discount^(t - k) rewards[:, t] (z_k = 0 for k >= length).
    """
    z = np.zeros((rewards.shape[0], rewards.shape[1] + 1))
    for t in reversed(range(rewards.shape[1])):
        z[:, t] = np.where(t < lengths, rewards[:, t] + discount * z[:, t + 1], 0.0)
    return z


def depth_rows(model: np.ndarray, real: np.ndarray, lengths: np.ndarray, ended: np.ndarray, near: int) -> np.ndarray:
    """The table's columns for each depth k, over the paths that reach it.

    Args:
      model: [N, D + 1] the model's value at depths 0..D.
      real: [N, D + 1] the real returns to go there (`returns_to_go`).
      lengths: [N] actions before each path's end: depth k counts while k <= length (the
        state after the last action, worth 0, included).
      ended: [N] bool, whether each path's game ended (not cut by the time limit, which an
        observation need not show).
      near: a state is near the end when its path's game ends within `near` actions of it.

    Returns:
      [D + 1, len(COLUMNS)]; means are NaN where no state counts.
    """

    def mean(x: np.ndarray, mask: np.ndarray) -> float:
        return float(x[mask].mean()) if mask.any() else float("nan")

    rows = []
    for k in range(model.shape[1]):
        live = k <= lengths
        close = live & ended & (lengths - k <= near)
        error = np.square(model[:, k] - real[:, k])
        rows.append(
            [
                live.sum(),
                mean(real[:, k], live),
                mean(model[:, k], live),
                mean(error, live),
                close.sum(),
                mean(real[:, k], close),
                mean(model[:, k], close),
            ]
        )
    return np.array(rows, float)


def tree_depths(root) -> tuple[int, float]:
    """(the depth of the deepest visited node, the mean depth a simulation reached) of a searched
    `Node` tree. A simulation that reached depth d visited one node at each depth 1..d, so the
    visits below the root, over those of the root's children, are the mean depth."""
    deepest, visits, stack = 0, 0, [(child, 1) for child in root.children.values()]
    while stack:
        node, depth = stack.pop()
        if node.visit_count:
            deepest, visits = max(deepest, depth), visits + node.visit_count
            stack.extend((child, depth + 1) for child in node.children.values())
    simulations = sum(child.visit_count for child in root.children.values())
    return deepest, visits / max(simulations, 1)


def collect_roots(loaded: tuple, episodes: int, every: int, seed: int) -> tuple[list[tuple], np.ndarray, list]:
    """(environment copy, observation, action played, legal actions, move) at every `every`-th position of
    `episodes` greedy games of the run's search, [roots, 2] `tree_depths` of the reference
    search's tree at each (greedy, the run's budget: the compiled search is tested equal to it),
    and each game's (moves played, last observation)."""
    from muzero.envs import make_environments
    from muzero.factories import make_run_searcher
    from muzero.game import Game
    from muzero.search.reference import softmax_sample
    from muzero.selfplay import legal_visits, search_games, search_move

    config, spec, network, _ = loaded
    g = config.game
    searcher = make_run_searcher(config, spec, episodes)
    bound = searcher.bind(network)
    games = [Game(g.action_space_size, g.discount, env, 1) for env in make_environments(g, episodes, seed)]
    roots, depths = [], []
    for move in range(g.max_moves):
        live = [game for game in games if not game.terminal()]
        if not live:
            break
        result, legal = search_games(searcher, bound, live, None, config.search)
        for row, game in enumerate(live):
            action = softmax_sample(legal_visits(result, legal, row), 0.0, None)
            if move % every == 0:
                snapshot = copy.deepcopy(game.environment)
                roots.append((snapshot, game.make_image(-1), action, np.flatnonzero(legal[row]), move))
                depths.append(tree_depths(search_move(config, network, game, None, greedy=True)[1]))
            game.apply(action)
    ends = [(len(game.history), game.make_image(-1)) for game in games]
    return roots, np.array(depths, float).reshape(-1, 2), ends


def real_paths(network, roots: list[tuple], depth: int, max_moves: int) -> tuple:
    """Each root's real paths, one per legal first action, then the policy head's largest action
    (over all actions: the games this probe reads have every action legal).

    A path stops where its game ends, or at `max_moves` moves from the game's start (`game.max_moves`,
    as self-play's games are cut there); only the first counts as ended.

    Returns:
      (root index [N], first action [N], actions [N, T], rewards [N, T], lengths [N], ended [N]
      bool), T the longest path (at least `depth`; actions past a path's end are 0).
    """
    index, first, environments, budget = [], [], [], []
    for i, (environment, _, _, legal, move) in enumerate(roots):
        for action in legal:
            index.append(i)
            first.append(int(action))
            environments.append(copy.deepcopy(environment))
            budget.append(max_moves - move)
    n = len(environments)
    actions, rewards = np.zeros((n, max_moves), np.int64), np.zeros((n, max_moves))
    lengths, ended = np.zeros(n, np.int64), np.zeros(n, bool)
    live = np.ones(n, bool)
    observations = [None] * n
    for t in range(max_moves):
        rows = np.flatnonzero(live)
        if not len(rows):
            break
        if t == 0:
            chosen = np.array(first)
        else:
            logits = np.asarray(network.initial_inference(np.stack([observations[r] for r in rows])).policy_logits)
            chosen = np.zeros(n, np.int64)
            chosen[rows] = logits.argmax(axis=1)
        for r in rows:
            observation, reward, terminated, truncated = environments[r].step(int(chosen[r]))
            actions[r, t], rewards[r, t], observations[r] = chosen[r], reward, observation
            lengths[r], ended[r] = t + 1, terminated
            live[r] = not (terminated or truncated or t + 1 >= budget[r])
    longest = max(int(lengths.max()), depth)
    return np.array(index), np.array(first), actions[:, :longest], rewards[:, :longest], lengths, ended


def model_values(network, observations: np.ndarray, actions: np.ndarray, depth: int, discount: float) -> tuple:
    """(values [N, depth + 1], Q of the first action [N]: r_1 + discount v_1) along the actions [N, >= depth]."""
    output = network.initial_inference(observations)
    values = [np.asarray(output.value, np.float64)]
    for k in range(depth):
        output = network.recurrent_inference(output.hidden_state, actions[:, k])
        values.append(np.asarray(output.value, np.float64))
        if k == 0:
            q = np.asarray(output.reward, np.float64) + discount * values[-1]
    return np.stack(values, axis=1), q


def head_actions(logits: np.ndarray) -> np.ndarray:
    """[rows] each row's largest entry of [rows, A] (the policy head's logits, the model's Qs), ties to the
    larger action (as the search's and evaluation's)."""
    return logits.shape[1] - 1 - np.argmax(logits[:, ::-1], axis=1)


def root_agreement(index: np.ndarray, model_q: np.ndarray, real_q: np.ndarray, margin: float = 1.0) -> tuple:
    """(roots whose real Qs spread over more than `margin` (largest less smallest), the share of them whose
    model Q's largest (ties to the larger action) is the real Qs' largest)."""
    clear = agree = 0
    for i in np.unique(index):
        rows = np.flatnonzero(index == i)
        if len(rows) < 2 or np.ptp(real_q[rows]) <= margin:
            continue
        clear += 1
        agree += int(head_actions(model_q[rows][None])[0] == np.argmax(real_q[rows]))  # ties to the larger
    return clear, agree / max(clear, 1)


def overrule(index: np.ndarray, first: np.ndarray, searched: np.ndarray, head: np.ndarray, real_q: np.ndarray) -> tuple:
    """Where the search's move differs from the policy head's: (such roots, the mean real Q of the
    search's move, of the head's, the share of them where the search's is really better by more
    than 1, where it is worse by more than 1).

    Args:
      index, first: [N] each real path's root and first action (`real_paths`).
      searched, head: [roots] the move the search played at each root, the policy head's largest.
      real_q: [N] each path's real return.
    """
    q = {(int(i), int(a)): float(r) for i, a, r in zip(index, first, real_q)}
    rows = [(q[i, int(searched[i])], q[i, int(head[i])]) for i in range(len(searched)) if searched[i] != head[i]]
    if not rows:
        return 0, float("nan"), float("nan"), float("nan"), float("nan")
    s, h = np.array(rows).T
    return len(rows), float(s.mean()), float(h.mean()), float(np.mean(s > h + 1)), float(np.mean(s < h - 1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="a run folder with a complete checkpoint")
    parser.add_argument("--step", type=int, help="the checkpoint's training step (default: the newest)")
    parser.add_argument("--episodes", type=int, default=8, help="greedy games played side by side")
    parser.add_argument("--every", type=int, default=10, help="a root at every n-th position played")
    parser.add_argument("--depth", type=int, default=20, help="the model's unroll, in actions")
    parser.add_argument("--near", type=int, default=10, help="'near the end': within this many actions")
    parser.add_argument("--seed", type=int, default=12345, help="environment seed (evaluation's)")
    args = parser.parse_args(argv)
    for name in ("episodes", "every", "depth"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}: expected at least 1, got {getattr(args, name)}")
    sys.path.insert(0, str(ROOT))
    from muzero.tf_runtime import load_tensorflow

    load_tensorflow()
    from muzero.checkpoints import CheckpointError
    from muzero.config_io import ConfigError
    from muzero.evaluation import load_run

    try:
        loaded = load_run(args.run, step=args.step)
    except (CheckpointError, ConfigError, ValueError) as error:  # each names its file
        parser.error(str(error))
    config, spec, network, step = loaded
    if spec.num_players != 1 or config.game.stacked_frames != 1 or config.search.algorithm == "gumbel":
        parser.error(f"{args.run}: this probe reads one-player games, one frame per observation, pUCT's counts")
    if args.depth > config.game.max_moves:
        parser.error(f"--depth: at most game.max_moves ({config.game.max_moves}), got {args.depth}")
    discount = config.game.discount
    roots, depths, ends = collect_roots(loaded, args.episodes, args.every, args.seed)
    index, first, actions, rewards, lengths, ended = real_paths(network, roots, args.depth, config.game.max_moves)
    real = returns_to_go(rewards, lengths, discount)
    observations = np.stack([roots[i][1] for i in index])
    model, model_q = model_values(network, observations, actions, args.depth, discount)
    played = np.array([roots[i][2] for i in index]) == first
    print(f"{args.run} at training step {step}: {len(roots)} roots, {len(index)} real paths (discount {discount})")
    print(
        f"the search's tree at the roots ({config.search.num_simulations} simulations): its deepest node at depth "
        f"{depths[:, 0].mean():.1f} on average (at most {depths[:, 0].max():.0f}); a simulation reaches depth "
        f"{depths[:, 1].mean():.2f} on average (training unrolls {config.train.num_unroll_steps})"
    )
    clear, share = root_agreement(index, model_q, real[:, 0])  # real Q(a): the path's return
    print(f"the model's Q picks the real paths' best root action at {share:.3f} of {clear} roots")
    head = head_actions(np.asarray(network.initial_inference(np.stack([root[1] for root in roots])).policy_logits))
    searched = np.array([root[2] for root in roots])
    n, s, h, better, worse = overrule(index, first, searched, head, real[:, 0])
    print(
        f"the search's move differs from the policy head's at {n} of {len(roots)} roots: its real return "
        f"{s:.2f} against the head's move's {h:.2f} (the search's better by more than 1 at {better:.2f} of them, "
        f"worse at {worse:.2f})"
    )
    for moves, observation in ends:
        numbers = np.asarray(observation, float).reshape(-1)
        last = " ".join(f"{x:+.3f}" for x in numbers) if numbers.size <= 16 else f"{numbers.size} numbers"
        print(f"a greedy game: {moves} moves, last observation [{last}]")
    for label, rows in (("played at the root", played), ("not played", ~played)):
        table = depth_rows(model[rows], real[rows, : args.depth + 1], lengths[rows], ended[rows], args.near)
        print(f"\nfirst action {label} ({rows.sum()} paths)")
        print("| k | " + " | ".join(COLUMNS) + " |")
        print("| --- " * (len(COLUMNS) + 1) + "|")
        for k, row in enumerate(table):
            cells = [f"{int(row[0])}"] + [f"{x:.2f}" for x in row[1:4]] + [f"{int(row[4])}"]
            print(f"| {k} | " + " | ".join(cells + [f"{x:.2f}" for x in row[5:]]) + " |")


if __name__ == "__main__":
    main()
