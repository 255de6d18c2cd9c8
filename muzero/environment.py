"""Environment adapter: a gymnasium environment behind the small interface `Game` needs."""

from __future__ import annotations

import numpy as np


class EnvironmentSpecError(ValueError):
    """An environment id that gymnasium does not know, or a mismatching action space."""


class Environment:
    """reset() -> observation; step(action) -> (observation, reward, terminated, truncated); legal_actions()."""

    def __init__(self, env_id: str, seed: int):
        import gymnasium

        try:
            self._env = gymnasium.make(env_id)
        except gymnasium.error.Error as error:
            raise EnvironmentSpecError(f"unknown environment id {env_id!r} ({error})") from None
        space = self._env.action_space
        if not isinstance(space, gymnasium.spaces.Discrete):
            raise EnvironmentSpecError(f"{env_id}: only discrete action spaces are supported, got {space}")
        self.action_space_size = int(space.n)
        self.observation_shape = tuple(self._env.observation_space.shape)
        self._seed = seed
        self.episodes = 0

    def reset(self) -> np.ndarray:
        # A distinct, reproducible seed per episode.
        observation, _ = self._env.reset(seed=self._seed * 1_000_003 + self.episodes)
        self.episodes += 1
        return np.asarray(observation, np.float32)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool]:
        """Returns (observation, reward, terminated, truncated) as gymnasium defines them:
        terminated when the episode really ended, truncated when a time limit cut it."""
        observation, reward, terminated, truncated, _ = self._env.step(int(action))
        return np.asarray(observation, np.float32), float(reward), bool(terminated), bool(truncated)

    def legal_actions(self) -> list[int]:
        return list(range(self.action_space_size))

    def close(self) -> None:
        self._env.close()


def check_environment(env_id: str, action_space_size: int) -> tuple[int, ...]:
    """Checks that `env_id` exists and has `action_space_size` actions; returns the observation shape.

    Raises:
      EnvironmentSpecError: with a one-line message.
    """
    env = Environment(env_id, seed=0)
    try:
        if env.action_space_size != action_space_size:
            raise EnvironmentSpecError(
                f"{env_id} has {env.action_space_size} actions, but game.action_space_size is {action_space_size}")
        return env.observation_shape
    finally:
        env.close()
