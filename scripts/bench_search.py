"""Search throughput, side by side in one run: reference vs batched vs DeepMind's mctx.

    python scripts/bench_search.py [--simulations 50] [--batches 16 64 256 1024] [--seconds 3]

CartPole-size network (observation 4, hidden state 32, one hidden layer of 64,
categorical value/reward over 21 bins, 2 actions), 50 simulations per move, random
root observations. Rows:

* reference, compiled TF network: `run_mcts` (one game) calling the Keras network
  through `tf.function` with a fixed input signature, batch 1.
* reference, numpy network: `run_mcts` calling `NumpyMLPNetwork` (what self-play uses).
* batched B: `run_batched_mcts` over B trees, one numpy network call per simulation.
* compiled B (XLA): `CompiledSearch`, the same search as one XLA-compiled TensorFlow
  graph calling the Keras network; compile time excluded.
* mctx B (when `pip install -e '.[bench]'` installed JAX and mctx): `mctx.muzero_policy`
  jit-compiled on the CPU, the same MLP and weights written in JAX, the same B and
  simulations; compile time excluded.

Each figure is the median of repeated timed rounds of at least `--seconds`. Ratios
are against the rows measured in this same run.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import tensorflow as tf

from muzero.config import GameConfig, MuZeroConfig, NetworkConfig, SearchConfig
from muzero.networks.base import Network, NetworkOutput
from muzero.networks.mlp import MLPNetwork
from muzero.search.batched import run_batched_mcts
from muzero.search.compiled import CompiledSearch
from muzero.search.reference import ActionHistory, Node, expand_node, run_mcts


class CompiledTFNetwork(Network):
    """The Keras network behind tf.function with fixed signatures: one compiled call per inference."""

    def __init__(self, network: MLPNetwork, observation_size: int, hidden_size: int):
        def initial(observation):
            out = network.initial_inference(observation)
            return out.value, out.reward, out.policy_logits, out.hidden_state

        def recurrent(hidden_state, action):
            out = network.recurrent_inference(hidden_state, action)
            return out.value, out.reward, out.policy_logits, out.hidden_state

        self._initial = tf.function(initial, input_signature=[tf.TensorSpec([None, observation_size], tf.float32)])
        self._recurrent = tf.function(
            recurrent, input_signature=[tf.TensorSpec([None, hidden_size], tf.float32), tf.TensorSpec([None], tf.int32)]
        )

    def initial_inference(self, observation) -> NetworkOutput:
        return NetworkOutput(*(t.numpy() for t in self._initial(np.asarray(observation, np.float32))))

    def recurrent_inference(self, hidden_state, action) -> NetworkOutput:
        return NetworkOutput(
            *(t.numpy() for t in self._recurrent(np.asarray(hidden_state, np.float32), np.asarray(action, np.int32)))
        )

    def training_steps(self) -> int:
        return 0


def timed(fn, seconds: float, rounds: int = 5) -> float:
    """Median seconds per call over `rounds` rounds of at least seconds / rounds each."""
    fn()  # warm-up (tracing, compilation)
    per_call = []
    for _ in range(rounds):
        calls, start = 0, time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= seconds / rounds:
                break
        per_call.append(elapsed / calls)
    return statistics.median(per_call)


def reference_move(config: MuZeroConfig, network: Network, observation: np.ndarray) -> None:
    root = Node(0)
    expand_node(root, 0, [0, 1], network.initial_inference(observation[None]).item(0))
    run_mcts(config, root, ActionHistory([], 2), network)


def mctx_searcher(weights: dict, support_size: int, num_simulations: int, discount: float):
    """muzero_policy over the same MLP in JAX; returns f(observations [B, 4]) -> visit counts."""
    import jax
    import jax.numpy as jnp
    import mctx

    params = {
        name: {layer: (jnp.asarray(k), jnp.asarray(b)) for layer, (k, b) in layers.items()}
        for name, layers in weights.items()
    }
    bins = jnp.arange(-support_size, support_size + 1, dtype=jnp.float32)

    def dense(p, x):
        return x @ p[0] + p[1]

    def trunk(p, x):
        return jax.nn.elu(dense(p["hidden_0"], x))

    def scale(s):
        low, high = s.min(-1, keepdims=True), s.max(-1, keepdims=True)
        return (s - low) / jnp.maximum(high - low, 1e-5)

    def scalar(logits):
        y = (jax.nn.softmax(logits) * bins).sum(-1)
        root = (jnp.sqrt(1 + 4 * 0.001 * (jnp.abs(y) + 1 + 0.001)) - 1) / (2 * 0.001)
        return jnp.sign(y) * (root**2 - 1)

    def predict(p, state):
        x = trunk(p["prediction"], state)
        return dense(p["prediction"]["policy"], x), scalar(dense(p["prediction"]["value"], x))

    def recurrent_fn(p, rng_key, action, state):
        x = trunk(p["dynamics"], jnp.concatenate([state, jax.nn.one_hot(action, 2)], -1))
        next_state = scale(dense(p["dynamics"]["state"], x))
        reward = scalar(dense(p["dynamics"]["reward"], x))
        logits, value = predict(p, next_state)
        out = mctx.RecurrentFnOutput(
            reward=reward, discount=jnp.full_like(reward, discount), prior_logits=logits, value=value
        )
        return out, next_state

    @jax.jit
    def search(p, rng_key, observations):
        state = scale(dense(p["representation"]["state"], trunk(p["representation"], observations)))
        logits, value = predict(p, state)
        root = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=state)
        return mctx.muzero_policy(p, rng_key, root, recurrent_fn, num_simulations=num_simulations).action_weights

    key = jax.random.PRNGKey(0)
    return lambda observations: search(params, key, observations).block_until_ready()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulations", type=int, default=50)
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 64, 256, 1024])
    parser.add_argument("--seconds", type=float, default=3.0, help="timing per row")
    args = parser.parse_args()

    config = MuZeroConfig(
        game=GameConfig(action_space_size=2, discount=0.997),
        search=SearchConfig(num_simulations=args.simulations),
        network=NetworkConfig(hidden_state_size=32, hidden_layers=(64,), support_size=10),
    )
    tf.keras.utils.set_random_seed(0)
    keras_network = MLPNetwork(config.network, config.action_space_size, observation_size=4)
    numpy_network = keras_network.published_network()
    compiled = CompiledTFNetwork(keras_network, 4, 32)
    rng = np.random.default_rng(0)
    observation = rng.normal(size=4).astype(np.float32)

    rows = []  # (name, B, moves/s)
    print(f"{args.simulations} simulations per move; each row is timed for ~{args.seconds:g}s", flush=True)
    seconds = timed(lambda: reference_move(config, compiled, observation), args.seconds)
    rows.append(("reference, compiled TF network", 1, 1 / seconds))
    print(f"  {rows[-1][0]}: {rows[-1][2]:.1f} moves/s", flush=True)
    seconds = timed(lambda: reference_move(config, numpy_network, observation), args.seconds)
    rows.append(("reference, numpy network", 1, 1 / seconds))
    print(f"  {rows[-1][0]}: {rows[-1][2]:.1f} moves/s", flush=True)

    try:
        search = mctx_searcher(keras_network.get_weights(), 10, args.simulations, config.discount)
    except ImportError:
        search = None
        print("  mctx not installed (pip install -e '.[bench]'): no mctx rows", flush=True)

    def tf_recurrent(hidden_state, action):
        out = keras_network.recurrent_inference(hidden_state, action)
        return out.value, out.reward, out.policy_logits, out.hidden_state

    compiled_search = CompiledSearch(
        config.search, config.discount, config.action_space_size, tf_recurrent, (32,), jit_compile=True
    )

    for batch in args.batches:
        observations = rng.normal(size=(batch, 4)).astype(np.float32)
        legal = np.ones((batch, 2), bool)

        def compiled_move(observations=observations, legal=legal):
            root = compiled.initial_inference(observations)
            compiled_search(root.hidden_state, root.policy_logits, root.reward, legal)

        rows.append((f"compiled (XLA), B={batch}", batch, batch / timed(compiled_move, args.seconds)))
        print(f"  {rows[-1][0]}: {rows[-1][2]:.0f} moves/s", flush=True)

        def batched(observations=observations, legal=legal):
            run_batched_mcts(
                config.search, config.discount, numpy_network.initial_inference(observations), numpy_network, legal
            )

        rows.append((f"batched, numpy network, B={batch}", batch, batch / timed(batched, args.seconds)))
        print(f"  {rows[-1][0]}: {rows[-1][2]:.0f} moves/s", flush=True)
        if search is not None:
            rows.append(
                (
                    f"mctx muzero_policy (JAX jit), B={batch}",
                    batch,
                    batch / timed(lambda observations=observations: search(observations), args.seconds),
                )
            )
            print(f"  {rows[-1][0]}: {rows[-1][2]:.0f} moves/s", flush=True)

    reference_tf, reference_np = rows[0][2], rows[1][2]
    mctx_by_batch = {b: r for name, b, r in rows if name.startswith("mctx")}
    print()
    print("| search | B | moves/s | simulations/s | vs reference (TF) | vs reference (numpy) | this / mctx |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, batch, rate in rows:
        ours = name.startswith(("batched", "compiled"))
        vs_mctx = f"{rate / mctx_by_batch[batch]:.2f}x" if ours and batch in mctx_by_batch else ""
        print(
            f"| {name} | {batch} | {rate:,.0f} | {rate * args.simulations:,.0f} | {rate / reference_tf:.1f}x | "
            f"{rate / reference_np:.1f}x | {vs_mctx} |"
        )


if __name__ == "__main__":
    main()
