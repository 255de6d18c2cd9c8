"""`GameJournal`: every finished game on disk as it reaches replay, so that a killed run loses none.

Why: in the concurrent loop games reach replay many times between two checkpoints, and the
games in progress live in the actors, not in the checkpoint. A run killed (SIGKILL, the
machine going down) between checkpoints would lose the games that finished since the last
one. The journal keeps them: each batch of games handed to replay is one file in
RUN_DIR/games/, written under a temporary name and renamed, so a killed process leaves the
whole file or none. A game's index is its place in `ReplayBuffer.games_saved`'s count; a
checkpoint holds that count, so a resumed run adds the journal's games from that index on
(`games_after`) and loses only the games that were still being played.

Files whose games are all older than the oldest checkpoint kept on disk are deleted
(`checkpointed`), so the journal holds a few checkpoint intervals of games. The interleaved
loop (`--backend local`) writes none: its checkpoints hold the games in progress, and it
resumes exactly.
"""

from __future__ import annotations

import collections
import os
import pickle
import re
from pathlib import Path

from muzero.game import Game

_FILE = re.compile(r"^(\d+)-(\d+)\.pkl$")


class GameJournal:
    """The run's finished games since the oldest checkpoint kept, in RUN_DIR/games/.

    Args:
      directory: the journal's folder (made at the first `append`).
      checkpoints_kept: how many checkpoints the run keeps (`run.max_checkpoints`): games
        older than the oldest of them are deleted.
    """

    def __init__(self, directory: Path, checkpoints_kept: int):
        self.directory = directory
        self.checkpoints: collections.deque[int] = collections.deque(maxlen=checkpoints_kept)

    def append(self, first_index: int, games: list[Game], training_steps: list[int]) -> None:
        """Writes `games` (indices first_index, first_index + 1, ...) with the learner's step at
        which each reached replay."""
        if not games:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{first_index:010d}-{first_index + len(games) - 1:010d}.pkl"
        temporary = path.with_name(path.name + ".tmp")
        try:
            with open(temporary, "wb") as f:
                pickle.dump(list(zip(games, training_steps)), f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, path)
        except BaseException:  # disk full, ...: the run stops, and its disk holds no half file
            temporary.unlink(missing_ok=True)
            raise

    def games_after(self, count: int) -> list[tuple[Game, int]]:
        """The journal's (game, training step) pairs of index `count` on, in order."""
        found: list[tuple[Game, int]] = []
        for first, last, path in self._files():
            if last < count:
                continue
            with open(path, "rb") as f:
                entries = pickle.load(f)
            found.extend(entries[max(count - first, 0) :])
        return found

    def checkpointed(self, games_saved: int) -> None:
        """A checkpoint holding `games_saved` games was written: deletes the files whose games are
        all older than the oldest checkpoint kept."""
        self.checkpoints.append(games_saved)
        if len(self.checkpoints) < (self.checkpoints.maxlen or 1):
            return
        oldest = self.checkpoints[0]
        for _, last, path in self._files():
            if last < oldest:
                path.unlink(missing_ok=True)
        for temporary in self.directory.glob("*.tmp"):  # of a process killed in `append`
            temporary.unlink(missing_ok=True)

    def drop_after(self, count: int) -> int:
        """Deletes the games of index `count` on (a run resumed at an older checkpoint on purpose:
        `--step`); returns how many files went."""
        dropped = 0
        for first, last, path in self._files():
            if first >= count:
                path.unlink(missing_ok=True)
                dropped += 1
            elif last >= count:  # a file across the cut keeps its older games
                with open(path, "rb") as f:
                    entries = pickle.load(f)[: count - first]
                path.unlink()
                self.append(first, [game for game, _ in entries], [step for _, step in entries])
                dropped += 1
        return dropped

    def _files(self) -> list[tuple[int, int, Path]]:
        """(first index, last index, path) of the journal's complete files, oldest first."""
        if not self.directory.is_dir():
            return []
        files = []
        for path in self.directory.iterdir():
            match = _FILE.match(path.name)
            if match:
                files.append((int(match.group(1)), int(match.group(2)), path))
        return sorted(files)
