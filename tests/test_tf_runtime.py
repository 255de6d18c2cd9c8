"""muzero/tf_runtime.py: how TensorFlow starts (log filter, an actor's thread and device limits)."""

from __future__ import annotations

import logging as std_logging
import subprocess
import sys

from absl import logging

from muzero.tf_runtime import filter_library_logs
from tests.helpers import ROOT


def _record(level: int, pathname: str) -> std_logging.LogRecord:
    return std_logging.LogRecord("absl", level, pathname, 1, "message", None, None)


def test_tensorflow_and_keras_info_is_dropped_but_their_warnings_and_ours_are_kept():
    handler = logging.get_absl_handler()
    before = list(handler.filters)
    try:
        filter_library_logs()
        added = [f for f in handler.filters if f not in before]
        assert len(added) == 1
        keep = added[0]
        assert not keep(_record(std_logging.INFO, "/site-packages/tensorflow/python/checkpoint.py"))
        assert not keep(_record(std_logging.INFO, "/site-packages/keras/src/saving.py"))
        assert keep(_record(std_logging.WARNING, "/site-packages/tensorflow/python/checkpoint.py"))
        assert keep(_record(std_logging.INFO, str(ROOT / "muzero" / "runner.py")))
    finally:
        handler.filters[:] = before


def test_an_actor_gets_its_threads_and_no_gpu_and_a_late_call_is_refused():
    # A fresh process: the limits hold only before TensorFlow runs; once it has, they raise.
    probe = (
        "from muzero.tf_runtime import limit_threads\n"
        "limit_threads(2, use_gpu=False)\n"
        "import tensorflow as tf\n"
        "tf.constant(1.0) + 1.0\n"
        "print(tf.config.threading.get_intra_op_parallelism_threads(),"
        " tf.config.threading.get_inter_op_parallelism_threads(), len(tf.config.get_visible_devices('GPU')))\n"
        "try:\n"
        "    limit_threads(3, use_gpu=False)\n"
        "except RuntimeError:\n"
        "    print('refused')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=False, timeout=120
    )
    assert result.stdout.split() == ["2", "2", "0", "refused"], result.stderr[-2000:]
