"""What a run carries besides the networks: counters and RNG states, and the checkpoint's state dict.

A checkpoint's `state-S.pkl` is one dict (`STATE_VERSION` 1); its layout is fixed so that
checkpoints of earlier versions of this code keep resuming:

    version, rng, eval_rng, python_random, numpy_global   the RNG states
    environments: (self-play environments, evaluation environments)
    games_in_progress: the self-play games being played (batched self-play)
    replay: `ReplayBuffer.state_dict()`
    counters: env_steps, wall_seconds, eval_seconds, nonfinite_skips, stored_moves
"""

from __future__ import annotations

import random

import numpy as np

STATE_VERSION = 1


def seed_everything(seed: int) -> None:
    """Python's, numpy's and TensorFlow's global seeds, and TensorFlow's global Generator."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(seed)  # Python, numpy and TensorFlow global seeds.
    # tf.random.Generator's global instance is not covered by set_seed; it is checkpointed.
    tf.random.set_global_generator(tf.random.Generator.from_seed(seed))


class RunState:
    """The run's counters and its self-play/replay RNG.

    Attributes:
      rng: draws self-play noise and actions and replay samples.
      counters: env_steps (self-play moves), wall_seconds, eval_seconds, nonfinite_skips,
        stored_moves (the moves of the games saved to replay).
    """

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.counters = {
            "env_steps": 0,
            "wall_seconds": 0.0,
            "eval_seconds": 0.0,
            "nonfinite_skips": 0,
            "stored_moves": 0,
        }

    def state_dict(
        self, eval_rng: np.random.Generator, environments: tuple, games_in_progress: list, replay: dict
    ) -> dict:
        """The checkpoint's state dict, from the parts the other owners hand in."""
        return {
            "version": STATE_VERSION,
            "rng": self.rng.bit_generator.state,
            "eval_rng": eval_rng.bit_generator.state,
            "python_random": random.getstate(),
            "numpy_global": np.random.get_state(),
            "environments": environments,
            "games_in_progress": games_in_progress,
            "replay": replay,
            "counters": dict(self.counters),
        }

    def load_state_dict(self, state: dict, eval_rng: np.random.Generator) -> None:
        """Restores the RNGs and counters (the other parts are restored by their owners)."""
        self.rng.bit_generator.state = state["rng"]
        eval_rng.bit_generator.state = state["eval_rng"]
        random.setstate(state["python_random"])
        np.random.set_state(state["numpy_global"])
        self.counters.update(state["counters"])
        # Checkpoints written before stored_moves was counted: every played move, near enough.
        if "stored_moves" not in state["counters"]:
            self.counters["stored_moves"] = self.counters["env_steps"]
