"""Gymnasium games with discrete actions (CartPole, ...): the default game plug-in.

`game.id` is the gymnasium id ("CartPole-v1", or "gym:CartPole-v1"); `game.kwargs` are
passed to `gymnasium.make`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from muzero.envs.base import EnvironmentSpecError, GamePlugin
from muzero.symmetries import mirror_symmetries

# Games whose physics keep a mirror symmetry (`replay.augment_symmetries`): CartPole's equations
# of motion, its random start (each number uniform in [-0.05, 0.05]) and its ends (|x| > 2.4,
# |angle| > 12 degrees) do not change when every number of the state is negated and the push
# goes the other way (action 0, left, <-> 1, right); tests/test_symmetries.py checks it against
# gymnasium's own steps.
_MIRRORED_GAMES = {"CartPole-v0": (1, 0), "CartPole-v1": (1, 0)}


class GymEnvironment:
    """A gymnasium environment behind the `Environment` protocol; one player, every action legal.

    Observations come as float32 arrays; a subclass may keep another dtype
    (`AtariEnvironment`: uint8 frames). It pickles with gymnasium's own pickling of
    the wrapped environment (CartPole's state included).

    Args:
      env_id: gymnasium id.
      seed: base seed; episode n is reset with a seed derived from it and n.
      kwargs: keyword arguments of `gymnasium.make`.
    """

    observation_dtype = np.float32
    num_players = 1

    def __init__(self, env_id: str, seed: int, kwargs: Mapping | None = None):
        import gymnasium

        self.env_id = env_id
        self.kwargs = dict(kwargs or {})
        try:
            self._env = self._make()
        except gymnasium.error.Error as error:
            raise EnvironmentSpecError(f"unknown environment id {env_id!r} ({error})") from None
        except TypeError as error:  # an unexpected keyword argument
            raise EnvironmentSpecError(f"{env_id}: {error}", key="game.kwargs") from None
        space = self._env.action_space
        if not isinstance(space, gymnasium.spaces.Discrete):
            raise EnvironmentSpecError(f"{env_id}: only discrete action spaces are supported, got {space}")
        self.action_space_size = int(space.n)
        self.observation_shape = tuple(self._env.observation_space.shape)
        mirrored = _MIRRORED_GAMES.get(env_id)
        # The identity first, then the mirror; () for games without a known symmetry.
        self.symmetries = mirror_symmetries(self.observation_shape[0], mirrored) if mirrored else ()
        self._seed = seed
        self.episodes = 0

    def _make(self):
        """The gymnasium environment (subclasses add wrappers)."""
        import gymnasium

        return gymnasium.make(self.env_id, **self.kwargs)

    def reset(self) -> np.ndarray:
        # A distinct, reproducible seed per episode.
        observation, _ = self._env.reset(seed=self._seed * 1_000_003 + self.episodes)
        self.episodes += 1
        return np.asarray(observation, self.observation_dtype)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool]:
        observation, reward, terminated, truncated, _ = self._env.step(int(action))
        return np.asarray(observation, self.observation_dtype), float(reward), bool(terminated), bool(truncated)

    def render(self) -> np.ndarray:
        """The screen now, as gymnasium's "rgb_array" rendering draws it: uint8 [H, W, 3].

        Only videos call this (muzero/video.py). Environments are made without a render
        mode, so that playing never draws; the first call switches the base environment
        to "rgb_array", which CartPole, ALE and MinAtar read at each `render()`.

        Raises:
          RuntimeError: the game cannot draw itself (no "rgb_array" mode, or a missing
            library such as pygame for CartPole), with a one-line reason.
        """
        import gymnasium

        base = self._env.unwrapped
        if base.render_mode is None:
            if "rgb_array" not in base.metadata.get("render_modes", ()):
                raise RuntimeError(f"{self.env_id} has no rgb_array rendering")
            base.render_mode = "rgb_array"
        try:
            frame = base.render()
        except gymnasium.error.DependencyNotInstalled as error:
            raise RuntimeError(f"{self.env_id} cannot draw itself: {error}") from None
        return np.asarray(frame)

    @property
    def video_fps(self) -> float:
        """Frames per second of a video of this game (one frame per move)."""
        return float(self._env.metadata.get("render_fps") or 30)

    def legal_actions(self) -> list[int]:
        return list(range(self.action_space_size))

    def to_play(self) -> int:
        return 0

    def close(self) -> None:
        self._env.close()


def _make(name: str, seed: int, kwargs: Mapping) -> GymEnvironment:
    return GymEnvironment(name, seed, kwargs)


PLUGIN = GamePlugin(name="gym", make=_make)
