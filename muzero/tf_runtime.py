"""TensorFlow start-up: which devices the learner uses."""

from __future__ import annotations


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
