"""The one seam numbers go through: TensorBoard scalars and text via `tf.summary`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import tensorflow as tf


class Summaries:
    """Writes scalars and text into one TensorBoard run directory.

    Metric names are namespaced: `loss/...`, `train/...`, `selfplay/...`,
    `replay/...`, `mcts/...`, `eval/...`.
    """

    def __init__(self, logdir: str):
        self._writer = tf.summary.create_file_writer(logdir)

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        with self._writer.as_default(step=step):
            for name, value in values.items():
                tf.summary.scalar(name, value)

    def text(self, name: str, text: str, step: int = 0) -> None:
        with self._writer.as_default(step=step):
            tf.summary.text(name, text)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    @staticmethod
    def truncate_after(logdir: str, step: int) -> None:
        """Drops events logged after `step` from the event files in `logdir`.

        Used on resume: what was logged between the checkpoint and the crash is
        logged again by the resumed run, so TensorBoard shows each step once. Each
        file is rewritten through a temporary file and a rename; a record cut short
        by the crash ends the file.
        """
        for path in sorted(Path(logdir).glob("events.out.tfevents.*")):
            kept = []
            try:
                for record in tf.data.TFRecordDataset(str(path)):
                    event = tf.compat.v1.Event.FromString(record.numpy())
                    if event.step <= step or event.HasField("file_version"):
                        kept.append(record.numpy())
            except tf.errors.DataLossError:
                pass
            tmp = path.with_name(path.name + ".tmp")
            with tf.io.TFRecordWriter(str(tmp)) as writer:
                for record in kept:
                    writer.write(record)
            os.replace(tmp, path)
