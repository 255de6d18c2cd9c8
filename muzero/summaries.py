"""The one seam numbers go through: TensorBoard scalars and text via `tf.summary`."""

from __future__ import annotations

from collections.abc import Mapping

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
