"""Atari through gymnasium and ale-py, wrapped as the paper's appendix describes.

`ALE/<Game>-v5` is made with frame skipping off in the base environment
(`frameskip=1`); gymnasium's `AtariPreprocessing` then repeats each action
`frame_skip` times (max-pooling the last two frames), resizes to `screen_size`
square RGB frames (uint8), starts each episode with up to `noop_max` random
no-ops, and ends the episode on a lost life only when asked. Sticky actions are
the base environment's `repeat_action_probability`. Rewards are not clipped: the
h(x) transform of the value and reward targets handles their scale. The v5
environments stop an episode at 108,000 frames (27,000 moves at action repeat 4),
reported as truncated.

The stacking of the last 32 frames and actions is not done here but by
`Game.make_image`, so replay stores each frame once.

`game.id: ALE/<Game>-v5` (or `atari:ALE/<Game>-v5`) selects this plug-in; `game.kwargs`
holds `AtariSettings`. It is a gymnasium game with ALE's wrapping, so it builds on the
gymnasium plug-in's adapter (the one sibling import in the family, for that reason).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from muzero.envs.base import GamePlugin, require_extra
from muzero.envs.gym import GymEnvironment


@dataclass(frozen=True)
class AtariSettings:
    """How an ALE game is wrapped (gymnasium's `AtariPreprocessing`); defaults are the paper's.

    The paper's main Atari results use no sticky actions, up to 30 no-op actions at the
    start of each episode, action repeat 4, 96x96 RGB frames, the full set of 18 actions,
    and no end of episode on a lost life.
    """

    # Frames each action is repeated for (the base environment's frameskip is set to 1
    # and the wrapper repeats, max-pooling the last two frames).
    frame_skip: int = field(default=4, metadata={"min": 1})
    # Side of the square RGB frame the wrapper resizes to.
    screen_size: int = field(default=96, metadata={"min": 8})
    # Up to this many random no-op actions after each reset (0: none).
    noop_max: int = field(default=30, metadata={"min": 0})
    # Machado et al.'s sticky actions: the previous action repeats with this probability.
    sticky_action_probability: float = field(default=0.0, metadata={"min": 0.0, "max": 1.0})
    # End the episode when a life is lost (the paper does not).
    terminal_on_life_loss: bool = False
    # All 18 joystick actions (the paper), or the game's minimal set.
    full_action_space: bool = True


class AtariEnvironment(GymEnvironment):
    """An ALE game behind `Environment`'s interface; observations are uint8 [S, S, 3] frames.

    It pickles with its emulator state (RAM, RNG) and the wrapper's frame buffers, so a
    checkpoint taken in the middle of a game resumes that game exactly (gymnasium's own
    pickling of ALE environments re-creates a fresh emulator instead).

    Args:
      env_id: e.g. "ALE/Pong-v5".
      seed: base seed; episode n is reset with a seed derived from it and n.
      settings: `game.kwargs`.
    """

    observation_dtype = np.uint8

    def __init__(self, env_id: str, seed: int, settings: AtariSettings):
        self.settings = settings
        super().__init__(env_id, seed)

    def _make(self):
        require_extra("ale_py", "atari", self.env_id)
        require_extra("cv2", "atari", f"{self.env_id} (frame resizing)")
        import ale_py
        import gymnasium
        from gymnasium.wrappers import AtariPreprocessing

        gymnasium.register_envs(ale_py)
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # no banner on every environment made
        s = self.settings
        env = gymnasium.make(
            self.env_id,
            frameskip=1,
            repeat_action_probability=s.sticky_action_probability,
            full_action_space=s.full_action_space,
        )
        return AtariPreprocessing(
            env,
            noop_max=s.noop_max,
            frame_skip=s.frame_skip,
            screen_size=s.screen_size,
            terminal_on_life_loss=s.terminal_on_life_loss,
            grayscale_obs=False,
            scale_obs=False,
        )

    @property
    def video_fps(self) -> float:
        """One video frame per move of `frame_skip` emulator frames: the console's 60 frames
        per second divided by it (15 with the usual 4), so that videos play in real time (ALE's
        `render_fps` metadata, 30, is not the console's rate)."""
        return 60.0 / self.settings.frame_skip

    def __getstate__(self) -> dict:
        wrapper = self._env
        return {
            "env_id": self.env_id,
            "seed": self._seed,
            "settings": self.settings,
            "episodes": self.episodes,
            "ale_state": wrapper.unwrapped.clone_state(include_rng=True),
            "np_random": wrapper.unwrapped.np_random.bit_generator.state,
            "obs_buffer": [buffer.copy() for buffer in wrapper.obs_buffer],
            "lives": wrapper.lives,
            "game_over": wrapper.game_over,
        }

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["env_id"], state["seed"], state["settings"])
        self.episodes = state["episodes"]
        wrapper = self._env
        wrapper.reset(seed=0)  # the emulator must be loaded before a state is restored into it
        wrapper.unwrapped.restore_state(state["ale_state"])
        wrapper.unwrapped.np_random.bit_generator.state = state["np_random"]
        for buffer, saved in zip(wrapper.obs_buffer, state["obs_buffer"]):
            buffer[...] = saved
        wrapper.lives, wrapper.game_over = state["lives"], state["game_over"]


def _make(name: str, seed: int, settings: AtariSettings) -> AtariEnvironment:
    return AtariEnvironment(name, seed, settings)


# Frames of 96x96: the resnet (its downsampling stack) is the network for them.
PLUGIN = GamePlugin(name="atari", make=_make, settings=AtariSettings, network_kinds=("resnet",))
