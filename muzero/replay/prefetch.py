"""`BatchPrefetcher`: the next training batch built on a thread beside the learner.

Why: sampling positions and building their targets (numpy, 0.25-0.5 of a CartPole or
tic-tac-toe training step) would otherwise run on the learner's thread between steps. The
training step runs in TensorFlow, which releases Python's GIL, so a thread builds batch
t + 1 while step t runs.

What it costs in exactness, bounded: batch t + 1 is drawn while step t runs, so it sees
the priorities written after step t - 1, not after step t (one step late; `depth` steps
at most), and games saved during step t from batch t + 2 on. The interleaved loop
(`--backend local`) does not use it, and stays bit-reproducible.
"""

from __future__ import annotations

import queue
import threading

from muzero.replay.buffer import ReplayBuffer, Sample

# Longest wait for room in the queue before the thread looks at the stop flag again.
POLL_SECONDS = 0.2


class BatchPrefetcher:
    """Keeps up to `depth` batches sampled ahead from `replay_buffer` (`ReplayBuffer.sample`).

    Args:
      replay_buffer: the replay to sample (thread-safe: its own lock).
      num_unroll_steps: K of every batch.
      td_steps: n of every batch's value targets.
      depth: batches built ahead (1: the next one).
    """

    def __init__(self, replay_buffer: ReplayBuffer, num_unroll_steps: int, td_steps: int, depth: int = 1):
        self.replay_buffer = replay_buffer
        self.num_unroll_steps, self.td_steps = num_unroll_steps, td_steps
        self.queue: queue.Queue = queue.Queue(maxsize=depth)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._fill, name="batch-prefetch", daemon=True)
        self.thread.start()

    def sample(self, num_unroll_steps: int, td_steps: int) -> Sample:
        """The next batch (as `ReplayBuffer.sample`); waits while it is being built.

        Raises:
          ValueError: `num_unroll_steps` or `td_steps` is not what the batches are built with.
          Whatever sampling raised on the thread.
        """
        if (num_unroll_steps, td_steps) != (self.num_unroll_steps, self.td_steps):
            raise ValueError(
                f"batches are prefetched with K={self.num_unroll_steps}, n={self.td_steps}; "
                f"asked for K={num_unroll_steps}, n={td_steps}"
            )
        item = self.queue.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        """Stops the thread (a batch being built is finished first, then dropped)."""
        self.stopped.set()
        while self.thread.is_alive():
            try:
                self.queue.get_nowait()  # room, so that a blocked put returns
            except queue.Empty:
                pass
            self.thread.join(POLL_SECONDS)

    def _fill(self) -> None:
        while not self.stopped.is_set():
            try:
                item: Sample | BaseException = self.replay_buffer.sample(self.num_unroll_steps, self.td_steps)
            except Exception as error:  # noqa: BLE001 (handed to the learner, which raises it)
                item = error
            while not self.stopped.is_set():
                try:
                    self.queue.put(item, timeout=POLL_SECONDS)
                    break
                except queue.Full:
                    continue
            if isinstance(item, BaseException):
                return
