"""A game defined outside the package, with no gymnasium: how a user adds one.

`game.id: tests.toy_game:make_line_walk` in a YAML file (tests/data/toy_game.yaml) is
all it takes: `muzero.envs` imports this module and calls `make_line_walk(seed,
**game.kwargs)`.

Line walk: a token starts in the middle of a line of `length` cells; action 0 moves
it left, 1 right; reaching the right end pays 1 and ends the game, the left end pays 0
and ends it. The observation is the one-hot position.
"""

from __future__ import annotations

import numpy as np


class LineWalk:
    observation_dtype = np.float32
    num_players = 1
    action_space_size = 2

    def __init__(self, seed: int, length: int = 5):
        if length < 3:
            raise ValueError(f"length must be at least 3, got {length}")
        self.length = length
        self.observation_shape = (length,)
        self.position = length // 2
        self.rng = np.random.default_rng(seed)

    def _observation(self) -> np.ndarray:
        return np.eye(self.length, dtype=np.float32)[self.position]

    def reset(self) -> np.ndarray:
        self.position = self.length // 2
        return self._observation()

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool]:
        self.position += 1 if action == 1 else -1
        ended = self.position in (0, self.length - 1)
        reward = 1.0 if self.position == self.length - 1 else 0.0
        return self._observation(), reward, ended, False

    def legal_actions(self) -> list[int]:
        return [0, 1]

    def to_play(self) -> int:
        return 0

    def close(self) -> None:
        pass


def make_line_walk(seed: int, length: int = 5) -> LineWalk:
    return LineWalk(seed, length)
