"""Crash-safe checkpoints: TensorFlow state plus the rest of the run (replay buffer, RNG
states, counters) beside it, committed as one unit.

A checkpoint at training step S is three things in `checkpoints/`:

1. `state-S.pkl`: replay buffer, numpy/Python RNG states, counters (written to a
   temporary file, fsync'ed, renamed);
2. `ckpt-S.index` / `ckpt-S.data-*`: networks, optimizer slots and iteration counter
   (the training step, hence the learning-rate position), TensorFlow's global RNG,
   written by `tf.train.Checkpoint.write`;
3. `ckpt-S.complete`: the completion marker, written last: the SHA-256 of each file above,
   as `sha256sum` writes them (`cd checkpoints && sha256sum -c ckpt-S.complete` checks them).

Like Dopamine's and Reverb's checkpointers, the marker is the commit, and the markers
are the store's only record: only checkpoints with a marker and all their files are
loaded or counted. A file whose digest differs from its marker's is corrupted (a garbled
pickle may well unpickle, into wrong numbers); an empty marker (older checkpoints) is not
checked. TensorFlow's `checkpoint` index file is rewritten from the markers
after each save, for TensorFlow's tools (`tf.train.latest_checkpoint`), and never read
here, so a garbled one changes nothing. After each save the store keeps the newest
`max_to_keep` complete checkpoints (and, with `keep_every_steps`, some older ones for
good) and deletes everything else in the folder that belongs to a checkpoint: older
ones, pieces without a marker (a kill mid-save), temporaries. A save that fails (disk
full) deletes what it wrote and says which complete checkpoint is the last.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from muzero.networks.keras import KerasNetwork
from muzero.run_dir import complete_steps, write_atomically, write_error_reason

# A piece of the checkpoint at step S: ckpt-S.index, ckpt-S.data-*, ckpt-S.complete,
# state-S.pkl, their temporaries, and the ckpt-S_temp/ folder of a TensorFlow write.
_PIECE = re.compile(r"^(?:ckpt|state)-(\d+)(?:[._]|$)")
# TensorFlow's index of the checkpoints in a folder.
TF_INDEX = "checkpoint"


class CheckpointError(RuntimeError):
    """No usable checkpoint, or one that cannot be written."""


class CheckpointWriteError(CheckpointError):
    """Writing a checkpoint failed (disk full, ...); none of its files is left behind."""


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


class _HashingWriter:
    """A binary file whose writes are hashed on the way: the state's digest without reading
    tens of GB back."""

    def __init__(self, file):
        self.file, self.hash = file, hashlib.sha256()

    def write(self, data) -> int:
        self.hash.update(data)
        return self.file.write(data)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


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
      optimizer: its slots (momentum, or Adam's moments) and iterations; None to restore weights only (evaluation).
      max_to_keep: the newest complete checkpoints kept.
      keep_every_steps: K > 0 also keeps, for good, the first complete checkpoint at or
        after each multiple of K (K, 2K, ...), so a run that slowly went wrong has older
        points to go back to (TensorFlow's keep_checkpoint_every_n_hours, in steps); 0: off.
    """

    def __init__(
        self,
        directory: str | Path,
        network: KerasNetwork,
        optimizer: keras.optimizers.Optimizer | None,
        max_to_keep: int = 3,
        keep_every_steps: int = 0,
    ):
        self.directory = Path(directory)
        self.network = network
        self.max_to_keep = max_to_keep
        self.keep_every_steps = keep_every_steps
        objects = dict(network.models)
        if optimizer is not None:
            objects["optimizer"] = optimizer
            objects["tf_rng"] = tf.random.get_global_generator()
        self.checkpoint = tf.train.Checkpoint(**objects)

    def save(self, step: int, state: dict) -> Path:
        """Writes a complete checkpoint for `step`, then prunes the folder; returns the marker's path.

        Raises:
          CheckpointError: if a network weight is NaN or Inf (nothing is written).
          CheckpointWriteError: if a write fails (disk full, ...): the message names the
            step, the file and the last complete checkpoint; what was written is deleted.
        """
        variables = self.network.trainable_variables + self.network.non_trainable_variables
        bad = [v.path for v in variables if not np.isfinite(v.numpy()).all()]
        if bad:
            raise CheckpointError(f"not writing checkpoint at step {step}: non-finite values in {', '.join(bad)}")
        marker = self.directory / f"ckpt-{step}.complete"
        path = self.directory  # what is being written, for the message
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            if marker.exists():  # an older checkpoint at this step stops counting before it is overwritten
                marker.unlink()
                _fsync_directory(self.directory)
            path = self.directory / f"state-{step}.pkl"
            digests = {}

            def write_state(f) -> None:  # pickled straight into the file: replay can be tens of GB (Atari frames)
                writer = _HashingWriter(f)
                pickle.dump(state, writer, protocol=pickle.HIGHEST_PROTOCOL)
                digests[path.name] = writer.hash.hexdigest()

            write_atomically(path, write_state)
            path = self.directory / f"ckpt-{step}"
            self.checkpoint.write(str(path))
            for written in [path.with_name(f"{path.name}.index"), *_data_files(path)]:
                digests[written.name] = _sha256(written)
            path = marker
            write_atomically(marker, "".join(f"{digest}  {name}\n" for name, digest in digests.items()))
            _fsync_directory(self.directory)
        except (OSError, tf.errors.OpError) as error:
            self._remove_steps({step})
            complete = complete_steps(self.directory)
            last = (
                f"the last complete checkpoint is {self.directory / f'ckpt-{complete[0]}'}"
                if complete
                else "there is no complete checkpoint yet"
            )
            reason = write_error_reason(error)  # TensorFlow's name the file ("PATH.index; No space left on device")
            raise CheckpointWriteError(
                f"cannot write the checkpoint at training step {step}: "
                f"{reason if str(path) in reason else f'{path}: {reason}'}; {last}"
            ) from None
        self.prune()
        return marker

    def prune(self) -> None:
        """Deletes every checkpoint piece in the folder but those of the kept complete checkpoints.

        Kept: the newest `max_to_keep` complete checkpoints and those kept for good
        (`keep_every_steps`); so a complete checkpoint is deleted only when `max_to_keep`
        newer complete ones exist. Deleted: older complete checkpoints, pieces without a
        marker or a marker without its files, temporaries. Then TensorFlow's index is
        rewritten to list the kept ones.
        """
        complete = complete_steps(self.directory)
        kept = set(complete[: self.max_to_keep]) | self.kept_for_good(complete)
        self._remove_steps(step for step in self._steps_present() if step not in kept)
        for entry in self.directory.glob("*.tmp*"):  # of killed writes (older runs': TensorFlow's checkpoint.tmp<id>)
            _remove(entry)
        self._write_tf_index(sorted(kept))

    def kept_for_good(self, steps: Iterable[int]) -> set[int]:
        """Of `steps`, those kept for good: the first at or after each multiple of `keep_every_steps`."""
        first: dict[int, int] = {}
        if self.keep_every_steps:
            for step in sorted(steps):
                if step >= self.keep_every_steps:
                    first.setdefault(step // self.keep_every_steps, step)
        return set(first.values())

    def set_aside_after(self, step: int) -> Path | None:
        """Moves the complete checkpoints newer than `step` into a folder of their own; returns it
        (None: there were none).

        A run resumed from an older checkpoint (`--step`, or a newest one that did not
        load) rewrites the history after it: left in place, the newer checkpoints would be
        picked by the next resume and overwritten step by step. In checkpoints/set-aside-*/
        neither a resume nor `prune` sees them, and moving them back restores them. Each
        file is hard-linked there before the originals go, so a kill at any moment loses
        none.
        """
        newer = {s for s in complete_steps(self.directory) if s > step}
        if not newer:
            return None
        folder = self.directory / f"set-aside-{time.strftime('%Y%m%d-%H%M%S')}"
        folder.mkdir(exist_ok=True)
        for entry in self._pieces(newer):
            if entry.is_file():
                target = folder / entry.name
                target.unlink(missing_ok=True)
                try:
                    os.link(entry, target)
                except OSError:  # a file system without hard links
                    shutil.copy2(entry, target)
        _fsync_directory(folder)
        self._remove_steps(newer)
        self._write_tf_index(sorted(complete_steps(self.directory)))
        return folder

    def _steps_present(self) -> set[int]:
        if not self.directory.is_dir():
            return set()
        return {int(match.group(1)) for entry in self.directory.iterdir() if (match := _PIECE.match(entry.name))}

    def _pieces(self, steps: Iterable[int]) -> list[Path]:
        """The files and folders of the checkpoints at `steps`, markers last."""
        steps = set(steps)
        if not steps or not self.directory.is_dir():
            return []
        pieces = [
            entry
            for entry in self.directory.iterdir()
            if (match := _PIECE.match(entry.name)) and int(match.group(1)) in steps
        ]
        return sorted(pieces, key=lambda entry: entry.name.endswith(".complete"))

    def _remove_steps(self, steps: Iterable[int]) -> None:
        """Deletes the checkpoints at `steps`, markers first (nothing half-deleted looks complete)."""
        for entry in reversed(self._pieces(steps)):
            _remove(entry)

    def _write_tf_index(self, steps: list[int]) -> None:
        """TensorFlow's `checkpoint` file for `steps` (oldest first), relative paths so that the
        run folder can move; a failure to write it only costs TensorFlow's tools their index."""
        path = self.directory / TF_INDEX
        try:
            if not steps:
                path.unlink(missing_ok=True)
                return
            lines = [f'model_checkpoint_path: "ckpt-{steps[-1]}"'] + [
                f'all_model_checkpoint_paths: "ckpt-{step}"' for step in steps
            ]
            write_atomically(path, "\n".join(lines) + "\n")
        except OSError as error:
            logging.warning("%s not updated (%s)", path, error.strerror)

    def restore(self, step: int | None = None) -> tuple[int, dict]:
        """Restores the newest complete checkpoint that loads, or the one at `step`; returns (step, state).

        Without `step`, a checkpoint whose files fail to load is named in a warning and
        the previous one is tried.

        Raises:
          CheckpointError: when no complete checkpoint loads (or the one at `step` does not).
        """
        steps = complete_steps(self.directory)
        if step is not None:
            if step not in steps:
                raise CheckpointError(f"{self.directory}: no complete checkpoint at step {step}")
            steps = [step]
        if not steps:
            raise CheckpointError(f"{self.directory}: no complete checkpoint")
        for candidate in steps:
            state = self._read(candidate)
            if state is not None:
                return candidate, state
        if step is not None:
            raise CheckpointError(f"{self.directory / f'ckpt-{step}'} could not be loaded")
        raise CheckpointError(f"{self.directory}: no complete checkpoint could be loaded")

    def _read(self, step: int) -> dict | None:
        """The checkpoint at `step` into the objects, and its state; None (with a warning naming
        the bad file) when it does not load."""
        prefix = self.directory / f"ckpt-{step}"
        state_path = self.directory / f"state-{step}.pkl"
        bad = self._digest_mismatch(step)
        if bad is not None:
            logging.warning("%s is corrupted (%s)", *bad)
            return None
        try:
            with open(state_path, "rb") as f:
                state = load_pickle(f)
        except Exception as error:  # noqa: BLE001 - any unpickling failure means a bad file
            logging.warning("%s is corrupted (%s)", state_path, type(error).__name__)
            return None
        try:
            status = self.checkpoint.read(str(prefix))
            status.assert_existing_objects_matched()
            status.expect_partial()
        except Exception as error:  # noqa: BLE001 - TF raises OpError, IndexError, ValueError... on bad files
            logging.warning("%s is corrupted (%s)", _first_bad_file(prefix), str(error).splitlines()[0][:200])
            return None
        return state

    def _digest_mismatch(self, step: int) -> tuple[Path, str] | None:
        """(the first file of the checkpoint at `step` whose SHA-256 differs from its marker's, why);
        the marker itself when it does not parse; None when all match or the marker is empty."""
        marker = self.directory / f"ckpt-{step}.complete"
        try:
            lines = marker.read_text(encoding="ascii").splitlines()
            expected = {name: digest for digest, name in (line.split("  ", 1) for line in lines)}
        except (OSError, UnicodeDecodeError, ValueError):
            return marker, "not a list of SHA-256 digests"
        if lines and f"state-{step}.pkl" not in expected:
            return marker, "not a list of SHA-256 digests"
        for name, digest in expected.items():
            path = self.directory / name
            try:
                if _sha256(path) != digest:
                    return path, f"its SHA-256 differs from the one in {marker.name}"
            except OSError as error:
                return path, error.strerror or type(error).__name__
        return None


def _remove(entry: Path) -> None:
    if entry.is_dir():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        entry.unlink(missing_ok=True)


def _data_files(prefix: Path) -> list[Path]:
    """TensorFlow's data files of the checkpoint at `prefix` (ckpt-S.data-00000-of-00001, ...)."""
    return sorted(p for p in prefix.parent.glob(prefix.name + ".data-*") if re.search(r"\.data-\d+-of-\d+$", p.name))


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
