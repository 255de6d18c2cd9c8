"""Checkpoints on disk through `tf.train.CheckpointManager`.

A checkpoint holds the three Keras networks, the optimizer (momentum slots and the
iteration counter, which is the training step and so the learning-rate position)
and the self-play counters. The manager writes its index file atomically and keeps
the newest `max_to_keep`.
"""

from __future__ import annotations

from pathlib import Path

import keras
import tensorflow as tf

from muzero.models import MLPNetwork


class Checkpointer:
    """Saves and restores a run's learner state under `directory`."""

    def __init__(self, directory: str | Path, network: MLPNetwork, optimizer: keras.optimizers.Optimizer | None,
                 max_to_keep: int = 3):
        self.games = tf.Variable(0, dtype=tf.int64, trainable=False, name="games")
        self.env_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="env_steps")
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="training_step")
        objects = dict(network.models, games=self.games, env_steps=self.env_steps, step=self.step)
        if optimizer is not None:
            objects["optimizer"] = optimizer
        self.checkpoint = tf.train.Checkpoint(**objects)
        self.manager = tf.train.CheckpointManager(self.checkpoint, str(directory), max_to_keep=max_to_keep)

    def save(self, step: int, games: int, env_steps: int) -> str:
        self.step.assign(step)
        self.games.assign(games)
        self.env_steps.assign(env_steps)
        return self.manager.save(checkpoint_number=step)

    def restore_latest(self, expect_partial: bool = False) -> str | None:
        """Restores the newest checkpoint; returns its path, or None when there is none."""
        path = self.manager.latest_checkpoint
        if path is None:
            return None
        status = self.checkpoint.restore(path)
        if expect_partial:
            status.expect_partial()
        return path
