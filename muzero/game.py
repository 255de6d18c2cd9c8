"""`Game`: one episode's record (observations, actions, rewards, search statistics).

A game holds an environment while it is played; `play_game` detaches it when the
game ends, so what goes to the replay buffer is plain, picklable data.
"""

from __future__ import annotations

import numpy as np

from muzero.envs.base import Environment
from muzero.networks.base import image_shape
from muzero.search.reference import ActionHistory, Node

__all__ = ["Game", "Target", "image_shape"]

# (value target, reward target, policy target); the policy target is empty past
# the end of the game (an absorbing state: no policy loss there).
Target = tuple[float, float, list[float]]


class Game:
    """A single episode of interaction with the environment.

    Attributes:
      history: actions a_0..a_{T-1}.
      rewards: rewards u_1..u_T; rewards[i] follows history[i], and is the reward of the
        player who played history[i] (two players: the mover's point of view).
      observations: o_0..o_T; observations[i] is seen before history[i].
      players: p_0..p_T, the player to move at each observation (None: one player, all 0).
      child_visits: per move, the root's normalised visit counts over all actions.
      root_values: per move, the root's search value.
      priorities: per move, prioritized replay's |value - n-step value target| as of the
        last checkpoint (the replay buffer keeps the live ones); None until then.
      legal: two players: per move, the legal actions at that position (Reanalyse searches
        stored positions again); None with one player (every action is legal).
      saved_step: the learner's training step when the game entered replay.
      reanalysis: Reanalyse's statistics as of the last checkpoint: (visit distributions
        [T, A], the learner's step when each reached replay [T], -1: not reanalysed); None until then.

    A segment of a longer game (`segment`, `selfplay.segment_length`) is a Game too: its
    position 0 is the episode's move `first_move`; `frames_before` observations and the
    actions `history_before` precede it for frame stacking; only its first `sampled_moves`
    moves are sampled (None: all), the rest being the following moves kept for its targets;
    `partial` while the episode goes on past it; the last segment carries the episode's
    return and length (`episode`).
    """

    # Class-level defaults: games pickled before these attributes existed still load.
    stacked_frames = 1
    priorities: np.ndarray | None = None
    players: list[int] | None = None
    num_players = 1
    legal: list[list[int]] | None = None
    saved_step = 0
    reanalysis: tuple[np.ndarray, np.ndarray] | None = None
    first_move = 0
    frames_before = 0
    history_before: tuple[int, ...] | list[int] = ()
    sampled_moves: int | None = None
    partial = False
    episode: tuple[float, int] | None = None
    segment_start = 0  # a game in progress: its moves already handed off in segments

    def __init__(
        self, action_space_size: int, discount: float, environment: Environment | None = None, stacked_frames: int = 1
    ):
        self.environment = environment
        self.stacked_frames = stacked_frames
        self.action_space_size = action_space_size
        self.discount = discount
        self.history: list[int] = []
        self.rewards: list[float] = []
        self.child_visits: list[list[float]] = []
        self.root_values: list[float] = []
        self.observations: list[np.ndarray] = []
        self.done = False
        self.terminated = False
        # Set when a time limit (or max_moves) cut the game short rather than the game
        # ending: the value of the last observation, to bootstrap from (see make_target).
        self.bootstrap_value: float | None = None
        if environment is not None:
            self.observations.append(environment.reset())
            self.num_players = environment.num_players
            if self.num_players > 1:
                self.players = [environment.to_play()]
                self.legal = []

    def terminal(self) -> bool:
        return self.done

    def legal_actions(self) -> list[int]:
        if self.environment is not None:
            return self.environment.legal_actions()
        return list(range(self.action_space_size))

    def apply(self, action: int) -> None:
        if self.legal is not None:
            self.legal.append(self.environment.legal_actions())
        observation, reward, terminated, truncated = self.environment.step(action)
        self.observations.append(observation)
        self.rewards.append(reward)
        self.history.append(action)
        self.done = terminated or truncated
        self.terminated = terminated
        if self.players is not None:
            self.players.append(self.environment.to_play())

    def truncated(self, max_moves: int) -> bool:
        """The game stopped without ending: a time limit or max_moves cut it."""
        return not self.terminated and (self.done or len(self.history) >= max_moves)

    def store_search_statistics(self, root: Node, policy=None) -> None:
        """Stores the root's normalised visit counts as the policy target, or `policy` [A]
        when the search gives one (Gumbel MuZero's improved policy), and its value."""
        visits = [root.children[a].visit_count if a in root.children else 0 for a in range(self.action_space_size)]
        self.store_visit_statistics(visits, root.value(), policy)

    def store_visit_statistics(self, visit_counts, root_value: float, policy=None) -> None:
        """`store_search_statistics` from arrays (the batched search): visits [A], root value,
        the search's policy target [A] or None."""
        if policy is not None:
            self.child_visits.append([float(p) for p in policy])
        else:
            sum_visits = sum(visit_counts)
            self.child_visits.append([float(count) / sum_visits for count in visit_counts])
        self.root_values.append(float(root_value))

    def make_image(self, state_index: int) -> np.ndarray:
        """The observation the representation function sees at `state_index` (-1: latest).

        With `stacked_frames` n > 1 (the paper's Atari input, n = 32): the frames
        o_{i-n+1} .. o_i and the actions that led to each of them, as one array
        [H, W, n * C + n]: the n frames' channels oldest first, then n constant planes
        holding each frame's incoming action index (the network divides them by the
        number of actions, giving the paper's a / A planes). Before the first frame of
        the game, frames are zeros; a frame with no incoming action (o_0 and the padding)
        gets a plane of zeros. Stacks are built here, when needed, so each frame is
        stored once.
        """
        n = self.stacked_frames
        if n == 1:
            return self.observations[state_index]
        before = self.frames_before  # a segment's frames that precede its position 0
        index = state_index % (len(self.observations) - before)
        first = index - n + 1
        frames = self.observations[max(first + before, 0) : index + before + 1]
        height, width, channels = frames[0].shape
        image = np.zeros((height, width, n * channels + n), frames[0].dtype)
        padding = n - len(frames)
        image[..., padding * channels : n * channels] = np.concatenate(frames, axis=-1)
        for j in range(n):
            frame = first + j  # the action into it: a_{frame - 1} of the episode
            if self.first_move + frame >= 1:  # before position 0: history_before, from its end
                image[..., n * channels + j] = (self.history if frame >= 1 else self.history_before)[frame - 1]
        return image

    # Why: a long game's positions reach replay before the game ends (docs/segments.md), with
    # the same targets as in the whole game, for which a segment carries the moves they read.
    def segment(self, start: int, stop: int, following: int, final: bool = False) -> Game:
        """Moves start..stop-1 of this game as a game of their own, for replay.

        Args:
          start, stop: the moves replay samples from it.
          following: moves after `stop` kept for the targets only (as many as were played):
            with num_unroll_steps + td_steps of them, every target of the sampled moves is the
            whole game's (tests/test_segments.py).
          final: the game has ended and stop = len(self): the segment ends as the game does
            and carries its return and length (`episode`).
        """
        end = min(stop + following, len(self.history))
        before = min(self.stacked_frames - 1, start)
        segment = Game(self.action_space_size, self.discount, None, self.stacked_frames)
        segment.first_move, segment.frames_before = start, before
        segment.history_before = self.history[max(start - before - 1, 0) : start]
        segment.observations = self.observations[start - before : end + 1]
        segment.history, segment.rewards = self.history[start:end], self.rewards[start:end]
        segment.child_visits, segment.root_values = self.child_visits[start:end], self.root_values[start:end]
        segment.num_players = self.num_players
        if self.players is not None:
            segment.players, segment.legal = self.players[start : end + 1], self.legal[start:end]
        if not final:
            segment.sampled_moves, segment.partial = stop - start, True
        else:
            segment.done, segment.terminated, segment.bootstrap_value = self.done, self.terminated, self.bootstrap_value
            segment.episode = (self.episode_return(), len(self))
        return segment

    def positions(self) -> int:
        """How many of its moves replay samples: all but a segment's following moves."""
        return len(self.history) if self.sampled_moves is None else self.sampled_moves

    # The value target is the discounted root value of the search tree td_steps
    # into the future, plus the discounted sum of all rewards until then
    # (revision 2: reward target aligned with the transition into the state).
    # Two players: every value target is from the point of view of the player to move at
    # its position. A reward is its mover's, and a root value its position's player's, so
    # each enters with the sign of that player against the one to move at the position.
    def make_target(self, state_index: int, num_unroll_steps: int, td_steps: int, to_play: int = 0) -> list[Target]:
        """Targets for positions state_index .. state_index + num_unroll_steps.

        The reward target at a position is the reward of the transition into it, from
        the point of view of the player who moved (two players: the one to move at the
        previous position). `to_play` is accepted for the pseudocode's signature; the
        players come from `self.players`.
        """
        targets = []
        for current_index in range(state_index, state_index + num_unroll_steps + 1):
            bootstrap_index = current_index + td_steps
            if bootstrap_index < len(self.root_values):
                value = (
                    self.sign(bootstrap_index, current_index)
                    * self.root_values[bootstrap_index]
                    * self.discount**td_steps
                )
            elif self.bootstrap_value is not None and current_index < len(self.root_values):
                # Not in the pseudocode: the game was cut by a time limit, not ended, so the
                # return goes on past the last observation; bootstrap from its value.
                last = len(self.root_values)
                value = self.sign(last, current_index) * self.bootstrap_value * self.discount ** (last - current_index)
            else:
                value = 0.0

            for i, reward in enumerate(self.rewards[current_index:bootstrap_index]):
                value += self.sign(current_index + i, current_index) * reward * self.discount**i

            if 0 < current_index <= len(self.rewards):
                last_reward = self.rewards[current_index - 1]
            else:
                last_reward = 0.0

            if current_index < len(self.root_values):
                targets.append((value, last_reward, self.child_visits[current_index]))
            else:
                # States past the end of games are treated as absorbing states.
                targets.append((0.0, last_reward, []))
        return targets

    def sign(self, index: int, point_of_view: int) -> float:
        """+1 when the same player is to move at positions `index` and `point_of_view`, else -1
        (always +1 with one player)."""
        if self.players is None:
            return 1.0
        return 1.0 if self.players[index] == self.players[point_of_view] else -1.0

    def to_play(self) -> int:
        """The player to move now."""
        return self.players[-1] if self.players is not None else 0

    def action_history(self) -> ActionHistory:
        return ActionHistory(self.history, self.action_space_size, self.to_play(), self.num_players)

    def episode_return(self) -> float:
        """The return of the episode (a segment: of the whole episode when it is the last one)."""
        return self.episode[0] if self.episode is not None else float(sum(self.rewards))

    def episode_length(self) -> int:
        return self.episode[1] if self.episode is not None else len(self.history)

    def __len__(self) -> int:
        return len(self.history)
