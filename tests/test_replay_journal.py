"""Tests for muzero/replay/journal.py: the concurrent loop's finished games on disk, and for
muzero/replay/prefetch.py: batches built on a thread beside the learner."""

from __future__ import annotations

import errno
import pickle

import numpy as np
import pytest

from muzero.config import ReplayConfig
from muzero.replay.journal import GameJournal
from muzero.replay.prefetch import BatchPrefetcher
from tests.test_replay import line_game, replay_buffer


def _starts(entries) -> list[float]:
    """Each journal entry's game, named by its first observation (`line_game`'s start)."""
    return [float(game.observations[0][0]) for game, _ in entries]


def test_games_after_a_count_come_back_in_order_with_their_steps(tmp_path):
    journal = GameJournal(tmp_path / "games", checkpoints_kept=3)
    # Games 0-1 at step 5, game 2 at step 7, games 3-5 at step 9: files 0-1, 2-2, 3-5.
    journal.append(0, [line_game(2, 0), line_game(2, 1)], [5, 5])
    journal.append(2, [line_game(2, 2)], [7])
    journal.append(3, [line_game(2, 3), line_game(2, 4), line_game(2, 5)], [9, 9, 9])
    journal.append(6, [], [])  # nothing to write: no file
    assert sorted(path.name for path in (tmp_path / "games").iterdir()) == [
        "0000000000-0000000001.pkl",
        "0000000002-0000000002.pkl",
        "0000000003-0000000005.pkl",
    ]
    # A checkpoint holding 4 games: games 4 and 5 are the ones to add back (the second half
    # of the last file).
    entries = journal.games_after(4)
    assert _starts(entries) == [4.0, 5.0] and [step for _, step in entries] == [9, 9]
    assert _starts(journal.games_after(0)) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert journal.games_after(6) == []


def test_a_half_written_file_is_not_read_and_old_files_go_after_enough_checkpoints(tmp_path):
    journal = GameJournal(tmp_path / "games", checkpoints_kept=2)
    journal.append(0, [line_game(2, 0)], [1])
    journal.append(1, [line_game(2, 1)], [2])
    # What a process killed during `append` leaves: the temporary name only.
    (tmp_path / "games" / "0000000002-0000000002.pkl.tmp").write_bytes(b"\x80half")
    assert _starts(journal.games_after(0)) == [0.0, 1.0]
    # Checkpoints holding 1 and then 2 games, 2 kept: the oldest kept holds 1 game, so file 0-0
    # (its games all older than game 1) goes; file 1-1 stays.
    journal.checkpointed(1)
    assert _starts(journal.games_after(0)) == [0.0, 1.0]  # one checkpoint: the older one may still be restored
    journal.checkpointed(2)
    assert _starts(journal.games_after(0)) == [1.0]
    assert not list((tmp_path / "games").glob("*.tmp"))  # the killed write's temporary went with them


def test_a_failed_write_leaves_no_temporary(tmp_path, monkeypatch):
    # The disk fills up during the write (found by scripts/soak.py: a full tmpfs left
    # games/N-N.pkl.tmp behind every time the journal was the write that failed).
    journal = GameJournal(tmp_path / "games", checkpoints_kept=2)
    journal.append(0, [line_game(2, 0)], [1])

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pickle, "dump", full_disk)
    with pytest.raises(OSError, match="No space left"):
        journal.append(1, [line_game(2, 1)], [2])
    assert sorted(path.name for path in (tmp_path / "games").iterdir()) == ["0000000000-0000000000.pkl"]


def test_drop_after_cuts_inside_a_file(tmp_path):
    journal = GameJournal(tmp_path / "games", checkpoints_kept=3)
    journal.append(0, [line_game(2, 0), line_game(2, 1), line_game(2, 2)], [1, 1, 1])
    journal.append(3, [line_game(2, 3)], [2])
    # Resumed on purpose at a checkpoint holding 2 games: games 2 and 3 go, 0 and 1 stay.
    assert journal.drop_after(2) == 2
    assert _starts(journal.games_after(0)) == [0.0, 1.0]
    journal.append(2, [line_game(2, 7)], [3])  # the resumed run's next game takes index 2
    assert _starts(journal.games_after(0)) == [0.0, 1.0, 7.0]


def test_prefetched_batches_write_priorities_to_their_own_rows():
    buffer = replay_buffer(batch_size=8, replay=ReplayConfig(window_size=10, priority_alpha=1.0))
    for start in range(4):
        buffer.save_game(line_game(3, 10.0 * start))
    prefetcher = BatchPrefetcher(buffer, num_unroll_steps=1, td_steps=1, depth=1)
    try:
        first = prefetcher.sample(1, 1)
        second = prefetcher.sample(1, 1)  # drawn while `first` was "training"
        # The priorities of `first` land on `first`'s rows although `second` was drawn since.
        buffer.update_priorities(np.full(len(first.rows), 123.0), first)
        flat = buffer._flat_games()
        assert (flat.priorities[first.rows] == 123.0).all()
        untouched = np.setdiff1d(second.rows, first.rows)
        assert (flat.priorities[untouched] != 123.0).all()
        with pytest.raises(ValueError, match="prefetched with K=1, n=1"):
            prefetcher.sample(2, 1)
    finally:
        prefetcher.close()
    assert not prefetcher.thread.is_alive()
