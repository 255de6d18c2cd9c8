"""Crash-safe checkpoints: TensorFlow state through `tf.train.CheckpointManager`, plus the
rest of the run (replay buffer, RNG states, counters) beside it, committed as one unit.

A checkpoint at training step S is three things in `checkpoints/`:

1. `state-S.pkl`: replay buffer, numpy/Python RNG states, counters (written to a
   temporary file, fsync'ed, renamed);
2. `ckpt-S.index` / `ckpt-S.data-*`: networks, optimizer slots and iteration counter
   (the training step, hence the learning-rate position), TensorFlow's global RNG,
   written by `CheckpointManager.save`, which updates its `checkpoint` file atomically;
3. `ckpt-S.complete`: the completion marker, written last.

Only checkpoints with a marker and all their files are loaded. A kill at any moment
leaves either a complete checkpoint or pieces without a marker, which the next start
deletes. Like Dopamine's and Reverb's checkpointers, the marker is the commit.
"""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from muzero.networks.keras import KerasNetwork
from muzero.run_dir import complete_steps, write_atomically


class CheckpointError(RuntimeError):
    """No usable checkpoint, or one that cannot be written."""


# Classes that moved since checkpoints were first written: (old module, old name) -> new place.
# Pickled environments name the class they were made from; these keep old checkpoints resuming.
MOVED_CLASSES = {
    ("muzero.environment", "Environment"): ("muzero.envs.gym", "GymEnvironment"),
    ("muzero.atari", "AtariEnvironment"): ("muzero.envs.atari", "AtariEnvironment"),
    ("muzero.config", "AtariConfig"): ("muzero.envs.atari", "AtariSettings"),
}


class _Unpickler(pickle.Unpickler):
    """`pickle.Unpickler` that finds moved classes at their new place (`MOVED_CLASSES`)."""

    def find_class(self, module: str, name: str):
        module, name = MOVED_CLASSES.get((module, name), (module, name))
        return super().find_class(module, name)


def load_pickle(file) -> object:
    """`pickle.load` for checkpoint files, old ones included."""
    return _Unpickler(file).load()


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Checkpointer:
    """Saves and restores a run's state under `directory`.

    Args:
      directory: the run's checkpoints/ folder.
      network: its Keras models are saved.
      optimizer: momentum slots and iterations; None to restore weights only (evaluation).
      max_to_keep: complete checkpoints kept.
    """

    def __init__(self, directory: str | Path, network: KerasNetwork, optimizer: keras.optimizers.Optimizer | None,
                 max_to_keep: int = 3):
        self.directory = Path(directory)
        self.network = network
        self.max_to_keep = max_to_keep
        objects = dict(network.models)
        if optimizer is not None:
            objects["optimizer"] = optimizer
            objects["tf_rng"] = tf.random.get_global_generator()
        self.checkpoint = tf.train.Checkpoint(**objects)
        self._manager: tf.train.CheckpointManager | None = None

    @property
    def manager(self) -> tf.train.CheckpointManager:
        if self._manager is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self.remove_incomplete()
            self._manager = tf.train.CheckpointManager(self.checkpoint, str(self.directory),
                                                       max_to_keep=self.max_to_keep)
        return self._manager

    def remove_incomplete(self) -> None:
        """Deletes pieces of checkpoints that never got their marker, and stray temporaries."""
        complete = set(complete_steps(self.directory))
        removed = False
        for entry in list(self.directory.iterdir()):
            match = re.match(r"^(?:ckpt|state)-(\d+)[.]", entry.name)
            if entry.name.endswith(".tmp") or (match and int(match.group(1)) not in complete):
                entry.unlink(missing_ok=True)
                removed = True
        if not removed:
            return
        # Point TensorFlow's `checkpoint` index at the complete ones only. Their creation
        # times go with them, or CheckpointManager would treat them as preserved forever.
        steps = sorted(complete)
        paths = [str(self.directory / f"ckpt-{step}") for step in steps]
        if paths:
            times = [(self.directory / f"ckpt-{step}.index").stat().st_mtime for step in steps]
            tf.compat.v1.train.update_checkpoint_state(str(self.directory), paths[-1], paths,
                                                       all_model_checkpoint_timestamps=times,
                                                       last_preserved_timestamp=min(times) - 1)
        else:
            (self.directory / "checkpoint").unlink(missing_ok=True)

    def save(self, step: int, state: dict) -> Path:
        """Writes a complete checkpoint for `step`; returns the marker's path.

        Raises:
          CheckpointError: if a network weight is NaN or Inf (nothing is written).
        """
        variables = self.network.trainable_variables + self.network.non_trainable_variables
        bad = [v.path for v in variables if not np.isfinite(v.numpy()).all()]
        if bad:
            raise CheckpointError(f"not writing checkpoint at step {step}: non-finite values in {', '.join(bad)}")
        manager = self.manager
        # Pickled straight into the file: replay can be tens of GB (Atari frames).
        write_atomically(self.directory / f"state-{step}.pkl",
                         lambda f: pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL))
        manager.save(checkpoint_number=step)
        marker = self.directory / f"ckpt-{step}.complete"
        write_atomically(marker, b"")
        _fsync_directory(self.directory)
        # The manager deleted the TensorFlow files of checkpoints beyond max_to_keep;
        # drop their state and marker too (marker first, so nothing half-present looks complete).
        kept = {int(path.rsplit("-", 1)[1]) for path in manager.checkpoints}
        for old_marker in self.directory.glob("ckpt-*.complete"):
            old = int(old_marker.name[len("ckpt-"):-len(".complete")])
            if old not in kept:
                old_marker.unlink(missing_ok=True)
                (self.directory / f"state-{old}.pkl").unlink(missing_ok=True)
        return marker

    def restore(self) -> tuple[int, dict]:
        """Restores the newest complete checkpoint that loads; returns (step, state).

        A checkpoint whose files fail to load is named in a warning and the previous one
        is tried.

        Raises:
          CheckpointError: when no complete checkpoint loads.
        """
        steps = complete_steps(self.directory)
        if not steps:
            raise CheckpointError(f"{self.directory}: no complete checkpoint")
        for step in steps:
            prefix = self.directory / f"ckpt-{step}"
            state_path = self.directory / f"state-{step}.pkl"
            try:
                with open(state_path, "rb") as f:
                    state = load_pickle(f)
            except Exception as error:  # noqa: BLE001 - any unpickling failure means a bad file
                logging.warning("%s is corrupted (%s); trying the previous checkpoint", state_path,
                                type(error).__name__)
                continue
            try:
                status = self.checkpoint.read(str(prefix))
                status.assert_existing_objects_matched()
                status.expect_partial()
            except Exception as error:  # noqa: BLE001 - TF raises OpError, IndexError, ValueError... on bad files
                bad_file = _first_bad_file(prefix)
                logging.warning("%s is corrupted (%s); trying the previous checkpoint", bad_file,
                                str(error).splitlines()[0][:200])
                continue
            return step, state
        raise CheckpointError(f"{self.directory}: no complete checkpoint could be loaded")


def _first_bad_file(prefix: Path) -> Path:
    """The file to name when a TensorFlow checkpoint does not load: the index if it does
    not parse, else the data file."""
    index = prefix.parent / (prefix.name + ".index")
    try:
        tf.train.load_checkpoint(str(prefix))
    except Exception:  # noqa: BLE001 - any failure to parse the index
        return index
    data = sorted(prefix.parent.glob(prefix.name + ".data-*"))
    return data[0] if data else index
