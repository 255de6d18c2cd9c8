"""TensorFlow start-up: its log levels, its CUDA probe's stderr, its threads and devices.

TensorFlow is imported only where a command needs it, after every check on the user's input
(`muzero.cli`); these functions say how it starts:

* `quiet_tensorflow_cpp`, `filter_library_logs`: its C++ INFO and WARNING lines off (oneDNN,
  CUDA probing), and its and Keras' own INFO messages out of the absl log;
* `load_tensorflow`: the import and the GPU lookup, without the CUDA probe's noise on a
  machine with no NVIDIA driver;
* `configure_devices`: the learner's devices, GPU memory grown as needed;
* `limit_threads`: a self-play actor's small thread pools, and no GPU unless it has one.
"""

from __future__ import annotations

import logging as std_logging
import os
import sys
import tempfile
from pathlib import Path

from absl import logging

# What TensorFlow prints on stderr while it looks for CUDA on a machine without an NVIDIA driver.
CUDA_PROBE_NOISE = ("cudart_stub.cc", "failed call to cuInit", "All log messages before absl::InitializeLog")


def quiet_tensorflow_cpp() -> None:
    """Before TensorFlow is imported: its C++ start-up chatter (oneDNN, CUDA probing) would
    hide the progress lines, so INFO and WARNING are off (TF_CPP_MIN_LOG_LEVEL 2) unless the
    environment says otherwise."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def filter_library_logs() -> None:
    """TensorFlow's and Keras' own INFO messages (checkpoint sharding, ...) are noise here;
    they arrive through absl logging, so the absl handler drops them by where they come
    from. Their warnings and errors still show."""
    logging.get_absl_handler().addFilter(_drop_library_info)


def _drop_library_info(record: std_logging.LogRecord) -> bool:
    quiet = ("/tensorflow/", "/keras/")
    return record.levelno >= std_logging.WARNING or not any(part in record.pathname for part in quiet)


def nvidia_driver_present() -> bool:
    """Whether this machine has an NVIDIA driver loaded (Linux: /proc/driver/nvidia, /dev/nvidiactl)."""
    return Path("/proc/driver/nvidia").exists() or Path("/dev/nvidiactl").exists()


def load_tensorflow() -> None:
    """Imports TensorFlow and lets it look for GPUs (once per process; after the input is checked).

    On a machine with no NVIDIA driver, TensorFlow's CUDA build prints lines such as
    "Could not find cuda drivers on your machine" and "failed call to cuInit" while it
    looks for GPUs, from C++ before its log settings apply (TF_CPP_MIN_LOG_LEVEL does
    not hide them all). There, the import and the GPU lookup run with stderr captured,
    and every other line is printed after. With a driver present nothing is hidden, so
    a GPU that fails to start is reported as TensorFlow reports it.
    """
    if "tensorflow" in sys.modules or nvidia_driver_present():
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow as tf

            tf.config.list_physical_devices("GPU")
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            lines = captured.read().decode("utf-8", errors="replace").splitlines(keepends=True)
            sys.stderr.write("".join(line for line in lines if not any(noise in line for noise in CUDA_PROBE_NOISE)))
            sys.stderr.flush()


def configure_devices() -> list[str]:
    """Uses a GPU when TensorFlow sees one (its default), growing its memory as needed
    instead of reserving it all, so evaluation and other processes can share it.
    Returns the devices the learner can use, e.g. ["GPU:0"] or ["CPU:0"]."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:  # already initialised in this process
            pass
    return [f"GPU:{i}" for i in range(len(gpus))] or ["CPU:0"]


def limit_threads(threads: int, use_gpu: bool) -> None:
    """Before TensorFlow does any work in this process: `threads` threads per op pool, and no
    GPU unless `use_gpu` (TensorFlow would otherwise map all GPU memory).

    Raises:
      RuntimeError: TensorFlow already ran in this process, so the limits cannot be set.
    """
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    if not use_gpu:
        tf.config.set_visible_devices([], "GPU")
