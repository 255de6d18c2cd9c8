"""Environment adapter: a gymnasium environment behind the small interface `Game` needs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from muzero.config import MuZeroConfig


class EnvironmentSpecError(ValueError):
    """An environment id that gymnasium does not know, or a mismatching action space.

    Attributes:
      key: the config key the problem is reported under.
    """

    def __init__(self, message: str, key: str = "game.id"):
        super().__init__(message)
        self.key = key


class Environment:
    """reset() -> observation; step(action) -> (observation, reward, terminated, truncated); legal_actions().

    Observations come as float32 arrays; subclasses may keep another dtype
    (`AtariEnvironment`: uint8 frames).
    """

    observation_dtype = np.float32

    def __init__(self, env_id: str, seed: int):
        import gymnasium

        self.env_id = env_id
        try:
            self._env = self._make()
        except gymnasium.error.Error as error:
            raise EnvironmentSpecError(f"unknown environment id {env_id!r} ({error})") from None
        space = self._env.action_space
        if not isinstance(space, gymnasium.spaces.Discrete):
            raise EnvironmentSpecError(f"{env_id}: only discrete action spaces are supported, got {space}")
        self.action_space_size = int(space.n)
        self.observation_shape = tuple(self._env.observation_space.shape)
        self._seed = seed
        self.episodes = 0

    def _make(self):
        """The gymnasium environment (subclasses add wrappers)."""
        import gymnasium

        return gymnasium.make(self.env_id)

    def reset(self) -> np.ndarray:
        # A distinct, reproducible seed per episode.
        observation, _ = self._env.reset(seed=self._seed * 1_000_003 + self.episodes)
        self.episodes += 1
        return np.asarray(observation, self.observation_dtype)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool]:
        """Returns (observation, reward, terminated, truncated) as gymnasium defines them:
        terminated when the episode really ended, truncated when a time limit cut it."""
        observation, reward, terminated, truncated, _ = self._env.step(int(action))
        return np.asarray(observation, self.observation_dtype), float(reward), bool(terminated), bool(truncated)

    def legal_actions(self) -> list[int]:
        return list(range(self.action_space_size))

    def close(self) -> None:
        self._env.close()


def make_environment(config: MuZeroConfig, seed: int) -> Environment:
    """The environment `config.game` describes: an ALE game when `game.atari` is set."""
    if config.game.atari is not None:
        from muzero.atari import AtariEnvironment

        return AtariEnvironment(config.game.id, seed, config.game.atari)
    return Environment(config.game.id, seed)


def check_environment(config: MuZeroConfig) -> tuple[int, ...]:
    """Checks that the game exists and has `game.action_space_size` actions; returns the observation shape.

    Raises:
      EnvironmentSpecError: with a one-line message.
    """
    env = make_environment(config, seed=0)
    try:
        if env.action_space_size != config.action_space_size:
            raise EnvironmentSpecError(f"{config.game.id} has {env.action_space_size} actions, but "
                                       f"game.action_space_size is {config.action_space_size}",
                                       key="game.action_space_size")
        if config.game.stacked_frames > 1 and len(env.observation_shape) != 3:
            raise EnvironmentSpecError(f"stacking frames needs image observations [H, W, C]; {config.game.id} "
                                       f"gives shape {env.observation_shape}", key="game.stacked_frames")
        return env.observation_shape
    finally:
        env.close()
