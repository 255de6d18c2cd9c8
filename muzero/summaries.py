"""The one seam numbers go through: TensorBoard scalars, histograms, images, text and the
hparams table, via `tf.summary`; and the figures computed for them from games and replay.

Tags (docs/tensorboard.md): `loss/...`, `train/...`, `selfplay/...`, `replay/...`,
`mcts/...`, `eval/...`, `values/...`; a tag ending in `_by_env_step` is logged against
environment steps (self-play moves) instead of training steps.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from absl import logging

from muzero.replay.buffer import game_nbytes
from muzero.run_dir import write_error_reason

# The suffix of tags logged against environment steps instead of training steps.
BY_ENV_STEP = "_by_env_step"
# Observation frames written per image summary (`images`).
MAX_FRAMES = 4


def flatten_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, bool | int | float | str]:
    """A nested config mapping (`config_io.config_to_dict`) as {"train.batch_size": 128, ...}:
    the values the hparams plugin takes (bool, int, float, str); lists and null as YAML text."""
    flat: dict[str, bool | int | float | str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten_config(value, name + "."))
        elif isinstance(value, (bool, int, float, str)):
            flat[name] = value
        else:  # lists, null, an empty mapping
            flat[name] = _yaml_text(value)
    return flat


def _yaml_text(value: Any) -> str:
    import yaml

    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def visit_entropy(child_visits: Iterable[Iterable[float]]) -> float:
    """Mean entropy (nats) of a game's root visit distributions: ln(A) for uniform visits over
    A actions, 0 when every simulation went to one action; nan for a game of no moves."""
    visits = np.asarray(list(child_visits), np.float64)
    if visits.size == 0:
        return float("nan")
    logs = np.log(np.where(visits > 0, visits, 1.0))
    return float(np.mean(-np.sum(visits * logs, axis=-1)))


def observation_frames(observations: list[np.ndarray], count: int = MAX_FRAMES) -> np.ndarray | None:
    """`count` frames spread evenly over a game's observations, as uint8 images [N, H, W, C]
    with C in (1, 3), or None when the observations are not images ([H, W, C]).

    Frames with another number of planes (MinAtar's one binary plane per object, 4 in
    Breakout: not RGBA) are drawn in grey levels, plane i as level (i + 1) / C (the highest
    plane set wins).
    """
    if not observations or np.ndim(observations[0]) != 3:
        return None
    picks = np.unique(np.linspace(0, len(observations) - 1, num=min(count, len(observations))).round().astype(int))
    frames = np.stack([np.asarray(observations[i]) for i in picks])
    if frames.dtype != np.uint8:  # [0, 1] floats or booleans
        frames = (np.clip(frames.astype(np.float32), 0.0, 1.0) * 255).astype(np.uint8)
    planes = frames.shape[-1]
    if planes not in (1, 3):
        levels = np.arange(1, planes + 1, dtype=np.float32) / planes
        frames = (np.max((frames > 0) * levels, axis=-1, keepdims=True) * 255).astype(np.uint8)
    return frames


class ReplayFootprint:
    """Positions and bytes held in replay, measured incrementally: each game's size is computed
    once (its observations, actions, rewards, root values and visit distributions as arrays)
    and remembered while the game is in the buffer."""

    def __init__(self):
        self._sizes: dict[int, tuple[Any, int, int]] = {}  # id(game) -> (game, positions, bytes)

    @staticmethod
    def game_size(game) -> tuple[int, int]:
        """(positions, bytes) of one game (bytes as `replay.max_bytes` counts them; positions
        sampled: a segment's following moves are not)."""
        return game.positions(), game_nbytes(game)

    def measure(self, games: Iterable) -> tuple[int, int]:
        """(positions, bytes) of `games`, the buffer's current contents."""
        sizes = {}
        for game in games:
            known = self._sizes.get(id(game))
            sizes[id(game)] = known if known is not None and known[0] is game else (game, *self.game_size(game))
        self._sizes = sizes
        return sum(size[1] for size in sizes.values()), sum(size[2] for size in sizes.values())


class SummaryWriteError(RuntimeError):
    """The event file cannot be written (disk full, ...); the message is one line."""


class Summaries:
    """Writes scalars and text into one TensorBoard run directory.

    Metric names are namespaced: `loss/...`, `train/...`, `selfplay/...`,
    `replay/...`, `mcts/...`, `eval/...`, `values/...`.

    A failed write (the events are flushed at the end of each call) raises
    `SummaryWriteError`, not TensorFlow's error, so that the loop can stop with one line.
    """

    def __init__(self, logdir: str):
        self.logdir = logdir
        self._writer = tf.summary.create_file_writer(logdir)

    @contextlib.contextmanager
    def _writing(self, step: int) -> Iterator[None]:
        try:
            with self._writer.as_default(step=step):
                yield
        except tf.errors.OpError as error:
            reason = write_error_reason(error)  # TensorFlow's names the file: "PATH; No space left on device"
            raise SummaryWriteError(f"cannot write TensorBoard's events in {self.logdir}: {reason}") from None

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        with self._writing(step):
            for name, value in values.items():
                tf.summary.scalar(name, value)

    def text(self, name: str, text: str, step: int = 0) -> None:
        with self._writing(step):
            tf.summary.text(name, text)

    def histograms(self, step: int, values: Mapping[str, np.ndarray]) -> None:
        with self._writing(step):
            for name, value in values.items():
                tf.summary.histogram(name, np.asarray(value, np.float32))

    def images(self, step: int, name: str, frames: np.ndarray) -> None:
        """uint8 frames [N, H, W, C], C in (1, 3, 4) (`observation_frames`)."""
        with self._writing(step):
            tf.summary.image(name, frames, max_outputs=len(frames))

    def hparams(self, values: Mapping[str, bool | int | float | str], trial_id: str) -> None:
        """The run's row in TensorBoard's HPARAMS tab: `values` (the flattened config,
        `flatten_config`) as its hyperparameters. The tab's metric columns are the run's
        scalars, each at its last value: `eval/mean_return` is the final evaluation."""
        from tensorboard.plugins.hparams import api as hp

        with self._writing(0):
            hp.hparams(dict(values), trial_id=trial_id)

    def flush(self) -> None:
        with self._writing(0):
            self._writer.flush()

    def close(self) -> None:
        """Flushes and closes the writer; a failure is a warning (the run is ending, maybe on the
        error that the same full disk raised elsewhere, which must stay the one reported)."""
        try:
            self._writer.close()
        except tf.errors.OpError as error:
            logging.warning("TensorBoard's last events in %s not written: %s", self.logdir, write_error_reason(error))

    @staticmethod
    def truncate_after(logdir: str, step: int, env_steps: int | None = None) -> None:
        """Drops events logged after `step` from the event files in `logdir` (events of
        `..._by_env_step` tags: after `env_steps`, when given).

        Used on resume: what was logged between the checkpoint and the crash is
        logged again by the resumed run, so TensorBoard shows each step once. A file with
        something to drop is rewritten through a temporary file and a rename, the others are
        left as they are; a record cut short by the crash ends the file. Every resume reads
        every file, so records are read with TensorFlow's record iterator: tf.data's, an
        eager op per record, took a minute per 40 MB of events (scripts/soak.py's hour).
        """
        from tensorflow.python.util import deprecation  # tf_record_iterator's notice, at every resume

        for path in sorted(Path(logdir).glob("events.out.tfevents.*")):
            kept, dropped = [], False
            try:
                with deprecation.silence():
                    records = tf.compat.v1.io.tf_record_iterator(str(path))
                for record in records:
                    event = tf.compat.v1.Event.FromString(record)
                    tags = [value.tag for value in event.summary.value]
                    by_env_step = env_steps is not None and tags and all(tag.endswith(BY_ENV_STEP) for tag in tags)
                    if event.step <= (env_steps if by_env_step else step) or event.HasField("file_version"):
                        kept.append(record)
                    else:
                        dropped = True
            except tf.errors.DataLossError:
                dropped = True
            if not dropped:
                continue
            tmp = path.with_name(path.name + ".tmp")
            with tf.io.TFRecordWriter(str(tmp)) as writer:
                for record in kept:
                    writer.write(record)
            os.replace(tmp, path)
