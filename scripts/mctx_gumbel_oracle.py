"""DeepMind mctx's Gumbel MuZero on table networks, stored as the oracle of tests/test_gumbel.py.

Runs `mctx.gumbel_muzero_policy` (float64) on B roots of a lookup-table network for each
setting below and writes, per setting, the tables, the roots, the Gumbel noise mctx drew
(read back from the search tree) and what it returned: the root's visit counts, the action
and the policy target (`action_weights`). The project's reference search
(`muzero.search.gumbel.run_gumbel_mcts`) is tested against this file, so the suite does not
need JAX.

The network: hidden states are integer ids; id' = (31 id + 7 a + 1) mod P; value, reward
and logits are table entries at id'. Two players are mctx's zero-sum convention, a
recurrent discount of -discount (values from the point of view of the player to move).

    pip install "jax[cpu]" mctx   # or: pip install -e '.[bench]'
    python scripts/mctx_gumbel_oracle.py --out tests/data/gumbel_mctx.npz
"""

from __future__ import annotations

import argparse

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # after float64 is enabled
import mctx

P = 1009  # distinct hidden states
ROOTS = 64
KEYS = ("actions", "players", "discount", "reward_scale", "simulations", "considered", "mask")
SETTINGS = {
    name: dict(zip(KEYS, values))
    for name, values in {
        # actions, players, discount, reward scale, simulations, max considered actions, masked root
        "one_player": (6, 1, 0.997, 0.3, 16, 4, False),
        "two_players": (4, 2, 0.9, 0.3, 12, 4, False),
        "two_players_board": (7, 2, 1.0, 0.0, 50, 16, True),
        "masked_root": (5, 1, 0.95, 0.3, 13, 4, True),  # 13: not a power of two
        "two_simulations": (3, 1, 0.997, 0.3, 2, 16, False),
    }.items()
}


def make_setting(seed: int, s: dict) -> dict:
    """Tables, roots, legal actions and players to move for one setting (numpy)."""
    rng = np.random.default_rng(seed)
    a = s["actions"]
    legal = np.ones((ROOTS, a), bool)
    if s["mask"]:
        legal = rng.random((ROOTS, a)) < 0.6
        legal[np.arange(ROOTS), rng.integers(a, size=ROOTS)] = True
    return {
        "values": rng.normal(size=P).astype(np.float32),
        "rewards": (rng.normal(size=P) * s["reward_scale"]).astype(np.float32),
        "logits": rng.normal(size=(P, a)).astype(np.float32),
        "root_ids": rng.integers(P, size=ROOTS),
        "legal": legal,
        "to_play": rng.integers(s["players"], size=ROOTS),
    }


def run_mctx(s: dict, data: dict, seed: int) -> dict:
    """mctx's Gumbel MuZero on the setting's roots: visit counts, action, policy target, noise."""
    values, rewards = jnp.asarray(data["values"], jnp.float64), jnp.asarray(data["rewards"], jnp.float64)
    logits = jnp.asarray(data["logits"], jnp.float64)
    discount = s["discount"] if s["players"] == 1 else -s["discount"]

    def recurrent_fn(params, rng_key, action, embedding):
        ids = (embedding * 31 + action * 7 + 1) % P
        out = mctx.RecurrentFnOutput(
            reward=rewards[ids],
            discount=jnp.full(ids.shape, discount, jnp.float64),
            prior_logits=logits[ids],
            value=values[ids],
        )
        return out, ids

    ids = jnp.asarray(data["root_ids"], jnp.int32)
    root = mctx.RootFnOutput(prior_logits=logits[ids], value=values[ids], embedding=ids)
    output = jax.jit(
        lambda key: mctx.gumbel_muzero_policy(
            params=(),
            rng_key=key,
            root=root,
            recurrent_fn=recurrent_fn,
            num_simulations=s["simulations"],
            invalid_actions=jnp.asarray(~data["legal"]),
            max_num_considered_actions=s["considered"],
        )
    )(jax.random.PRNGKey(seed))
    tree = output.search_tree
    return {
        "gumbel": np.asarray(tree.extra_data.root_gumbel),
        "visit_counts": np.asarray(tree.summary().visit_counts),
        "action": np.asarray(output.action),
        "policy": np.asarray(output.action_weights),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="tests/data/gumbel_mctx.npz")
    args = parser.parse_args()
    arrays = {}
    for seed, (name, s) in enumerate(SETTINGS.items()):
        data = make_setting(seed, s)
        data.update(run_mctx(s, data, seed))
        for key, value in {**data, **{f"setting_{k}": v for k, v in s.items()}}.items():
            arrays[f"{name}/{key}"] = np.asarray(value)
        distinct = len({tuple(v) for v in data["visit_counts"]})
        print(f"{name}: {ROOTS} roots, {distinct} distinct visit-count rows, mctx {mctx.__version__}")
    np.savez_compressed(args.out, **arrays)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
