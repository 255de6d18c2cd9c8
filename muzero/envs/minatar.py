"""MinAtar (Young & Tian 2019): five Atari games as 10x10 frames, to show the image path learns on a CPU.

`game.id: minatar:<game>` selects a game, `<game>` one of asterix, breakout, freeway,
seaquest, space_invaders, played with the game's minimal action set (gymnasium id
`MinAtar/<Game>-v1`). The gymnasium ids themselves are accepted too
(`MinAtar/Breakout-v1`, or `-v0` for all 6 actions), with or without the prefix.
`game.kwargs` holds `MinAtarSettings`.

Observations are the game's boolean planes [10, 10, C] (C: 4 for Breakout, 6 for Space
Invaders, 4 for Asterix, 7 for Freeway, 10 for Seaquest) as uint8 0 / 255, so that they
take Atari's image path unchanged: `Game.make_image` stacks frames and action planes,
the resnet divides frames by 255 (back to 0 / 1), replay stores one byte per cell.

MinAtar has no episode cap in most games (Freeway alone ends after 2,500 frames): a good
agent keeps Breakout or Space Invaders going for ever. `game.max_moves` is the cap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from muzero.envs.base import EnvironmentSpecError, GamePlugin, require_extra
from muzero.envs.gym import GymEnvironment

# MinAtar's module names, and the names of the gymnasium ids (`MinAtar/<Name>-v1`).
GAMES = {
    "asterix": "Asterix",
    "breakout": "Breakout",
    "freeway": "Freeway",
    "seaquest": "Seaquest",
    "space_invaders": "SpaceInvaders",
}


@dataclass(frozen=True)
class MinAtarSettings:
    """How a MinAtar game is played; the defaults are the MinAtar paper's (its DQN curves used them)."""

    # The previous action repeats with this probability (MinAtar's default and the paper: 0.1).
    sticky_action_probability: float = field(default=0.1, metadata={"min": 0.0, "max": 1.0})
    # The game speeds up as it goes on (Asterix, Freeway, Seaquest, Space Invaders; the paper: on).
    difficulty_ramping: bool = True


def parse_name(name: str) -> tuple[str, bool]:
    """(MinAtar module name, minimal action set) for "breakout" or "MinAtar/Breakout-v1" (-v0: all 6 actions).

    Raises:
      EnvironmentSpecError: any other name, listing the games.
    """
    if name in GAMES:
        return name, True
    for game, title in GAMES.items():
        for version, minimal in (("v1", True), ("v0", False)):
            if name == f"MinAtar/{title}-{version}":
                return game, minimal
    raise EnvironmentSpecError(
        f"unknown MinAtar game {name!r}; expected one of {', '.join(GAMES)} (or MinAtar/<Game>-v1, -v0)"
    )


class MinAtarEnvironment(GymEnvironment):
    """A MinAtar game behind `Environment`; observations are uint8 [10, 10, C] of 0 and 255.

    It wraps minatar's own gymnasium environment (`minatar.gym.BaseEnv`), made directly
    rather than through `gymnasium.make` (no registration, no checker wrappers); its state
    (the game's objects and numpy RandomState) pickles as it is, so a checkpoint resumes a
    game in progress exactly.

    Args:
      name: see `parse_name`.
      seed: base seed; episode n is reset with a seed derived from it and n.
      settings: `game.kwargs`.
    """

    observation_dtype = np.uint8

    def __init__(self, name: str, seed: int, settings: MinAtarSettings):
        self.game_name, self.minimal_action_set = parse_name(name)
        self.settings = settings
        super().__init__(name, seed)

    def _make(self):
        require_extra("minatar", "minatar", f"MinAtar game {self.env_id!r}")
        from minatar.gym import BaseEnv

        s = self.settings
        return BaseEnv(
            self.game_name,
            use_minimal_action_set=self.minimal_action_set,
            sticky_action_prob=s.sticky_action_probability,
            difficulty_ramping=s.difficulty_ramping,
        )

    def reset(self) -> np.ndarray:
        # A distinct, reproducible seed per episode, as `GymEnvironment`'s, cut to the 32 bits
        # of the numpy RandomState MinAtar seeds.
        observation, _ = self._env.reset(seed=(self._seed * 1_000_003 + self.episodes) % 2**32)
        self.episodes += 1
        return np.asarray(observation, np.uint8) * np.uint8(255)  # bool planes: 0/1 -> 0/255

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool]:
        observation, reward, terminated, truncated = super().step(action)
        return observation * np.uint8(255), reward, terminated, truncated

    def render(self) -> np.ndarray:
        """The frame in MinAtar's own colours (seaborn's cubehelix per plane): uint8 [10, 10, 3]."""
        frame = super().render()  # float [10, 10, 3] in [0, 1]
        return np.clip(np.rint(frame * 255.0), 0, 255).astype(np.uint8)

    # One move is one MinAtar frame; 30 per second is too fast to follow.
    video_fps = 15.0


def _make(name: str, seed: int, settings: MinAtarSettings) -> MinAtarEnvironment:
    return MinAtarEnvironment(name, seed, settings)


# 10x10 frames: the resnet without downsampling (`network.downsample: false`) is the network for them.
PLUGIN = GamePlugin(name="minatar", make=_make, settings=MinAtarSettings, network_kinds=("resnet",))
