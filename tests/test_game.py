"""Tests for muzero/game.py: make_target and store_search_statistics, by hand."""

from __future__ import annotations

import pytest

from muzero.game import Game
from muzero.search.reference import Node


def _game(rewards, root_values, discount=0.5):
    game = Game(action_space_size=2, discount=discount)
    game.rewards = list(rewards)
    game.root_values = list(root_values)
    game.history = [0] * len(rewards)
    game.child_visits = [[0.1 * (i + 1), 0.1 * (9 - i)] for i in range(len(rewards))]
    return game


class TestMakeTarget:
    def test_bootstrap_inside_then_past_the_end_and_absorbing(self):
        game = _game(rewards=[1, 2, 3, 4], root_values=[10, 20, 30, 40], discount=0.5)
        targets = game.make_target(state_index=1, num_unroll_steps=3, td_steps=2)
        # index 1: bootstrap 3 < 4 -> 40 * 0.5^2 = 10; rewards[1:3] = 2 + 3 * 0.5 = 3.5 -> 13.5;
        #          reward target rewards[0] = 1 (the transition into state 1)
        # index 2: bootstrap 4 is past the end -> 0; rewards[2:4] = 3 + 4 * 0.5 = 5; reward rewards[1] = 2
        # index 3: bootstrap 5 -> 0; rewards[3:5] = 4; reward rewards[2] = 3
        # index 4: past the last root value: absorbing -> value 0, reward rewards[3] = 4, no policy
        assert [(v, r) for v, r, _ in targets] == [(13.5, 1), (5.0, 2), (4.0, 3), (0.0, 4)]
        # Policy targets are the stored visit distributions of states 1, 2, 3; none past the end.
        assert [p for _, _, p in targets] == game.child_visits[1:4] + [[]]

    def test_initial_reward_is_zero_and_states_past_the_end_are_all_zero(self):
        game = _game(rewards=[1, 1], root_values=[5, 6], discount=1.0)
        targets = game.make_target(state_index=0, num_unroll_steps=3, td_steps=1)
        # index 0: root_values[1] * 1 + rewards[0] = 6 + 1 = 7; reward 0 (no transition into the first state)
        # index 1: bootstrap 2 past the end: rewards[1] = 1; reward rewards[0] = 1
        # index 2: absorbing, reward rewards[1] = 1 (the last real transition)
        # index 3: absorbing, 0 < 3 <= 2 is false -> reward 0
        assert [(v, r) for v, r, _ in targets] == [(7.0, 0), (1.0, 1), (0.0, 1), (0.0, 0)]
        assert [len(p) for _, _, p in targets] == [2, 2, 0, 0]

    def test_discounted_n_step_sum(self):
        game = _game(rewards=[1, 1, 1, 1, 1], root_values=[0, 0, 0, 0, 8], discount=0.5)
        ((value, _, _),) = game.make_target(state_index=0, num_unroll_steps=0, td_steps=4)
        # 1 + 0.5 + 0.25 + 0.125 + 8 * 0.5^4 = 1.875 + 0.5 = 2.375
        assert value == pytest.approx(2.375)


def test_store_search_statistics_normalises_visits_over_the_action_space():
    game = Game(action_space_size=3, discount=1.0)
    root = Node(0)
    root.visit_count, root.value_sum = 4, 8.0
    root.children = {0: Node(0.5), 1: Node(0.5)}
    root.children[0].visit_count, root.children[1].visit_count = 1, 3
    game.store_search_statistics(root)
    # Visits 1 and 3 of 4; action 2 is not a child -> 0. Root value 8 / 4 = 2.
    assert game.child_visits == [[0.25, 0.75, 0.0]]
    assert game.root_values == [2.0]


def test_truncated_game_bootstraps_from_its_final_value():
    game = _game(rewards=[1, 1, 1], root_values=[5, 6, 7], discount=0.5)
    game.bootstrap_value = 10.0
    targets = game.make_target(state_index=0, num_unroll_steps=3, td_steps=2)
    # index 0: bootstrap 2 inside: 7 * 0.25 + 1 + 0.5 = 3.25 (as without truncation)
    # index 1: bootstrap 3 past the end: 10 * 0.5^(3 - 1) = 2.5, + 1 + 0.5 = 4.0
    # index 2: 10 * 0.5^(3 - 2) = 5, + 1 = 6.0
    # index 3: past the end: absorbing, 0
    assert [v for v, _, _ in targets] == [3.25, 4.0, 6.0, 0.0]
    game.bootstrap_value = None
    # The pseudocode's absorbing end: 1 + 0.5 = 1.5 and 1.
    assert [v for v, _, _ in game.make_target(0, 3, 2)] == [3.25, 1.5, 1.0, 0.0]


class _ScriptedEnvironment:
    num_players = 1

    def __init__(self, endings):
        self.endings = list(endings)

    def reset(self):
        return [0.0]

    def step(self, action):
        terminated, truncated = self.endings.pop(0)
        return [0.0], 1.0, terminated, truncated

    def legal_actions(self):
        return [0, 1]


@pytest.mark.parametrize(
    "endings, max_moves, expected",
    [
        ([(False, False), (True, False)], 10, False),  # the pole fell: a real end
        ([(False, False), (False, True)], 10, True),  # gymnasium's time limit
        ([(False, False), (False, False)], 2, True),  # max_moves
    ],
)
def test_truncated_versus_terminated(endings, max_moves, expected):
    game = Game(action_space_size=2, discount=1.0, environment=_ScriptedEnvironment(endings))
    game.apply(0)
    game.apply(1)
    assert game.truncated(max_moves) is expected


class _TwoPlayerScript:
    """Players 0 and 1 alternate from player 0; the last of `moves` moves wins (reward +1 to its
    mover, 0 before), as in a board game that ends with a win."""

    num_players = 2

    def __init__(self, moves: int):
        self.moves, self.played = moves, 0

    def reset(self):
        return [0.0]

    def step(self, action):
        self.played += 1
        ended = self.played == self.moves
        return [0.0], (1.0 if ended else 0.0), ended, False

    def legal_actions(self):
        return [0, 1]

    def to_play(self):
        return self.played % 2


def _two_player_game(moves: int) -> Game:
    game = Game(action_space_size=2, discount=1.0, environment=_TwoPlayerScript(moves))
    for i in range(moves):
        game.apply(0)
        game.store_visit_statistics([1, 1], root_value=0.1 * (i + 1))  # root values 0.1, 0.2, ...
    return game


@pytest.mark.parametrize("moves, winner", [(5, 0), (4, 1)], ids=["first_player_wins", "second_player_wins"])
def test_two_player_targets_are_from_the_point_of_view_of_the_player_to_move(moves, winner):
    game = _two_player_game(moves)
    assert game.players == [i % 2 for i in range(moves + 1)]
    # Monte-Carlo targets (td_steps past the end, discount 1): the only reward is the last
    # mover's +1, so the value target is +1 where the winner is to move and -1 where the loser is:
    # 5 moves (player 0 wins): [1, -1, 1, -1, 1]; 4 moves (player 1 wins): [-1, 1, -1, 1].
    values = [target[0] for target in game.make_target(0, moves - 1, td_steps=10)]
    assert values == [1.0 if i % 2 == winner else -1.0 for i in range(moves)]
    # The reward target of the last transition is the mover's (the winner's) +1.
    assert game.make_target(moves, 0, td_steps=10)[0][1] == 1.0


def test_two_player_bootstrap_and_reward_signs_with_n_steps():
    game = _two_player_game(5)  # players 0 1 0 1 0 | 1; root values 0.1 .. 0.5; u_5 = +1 to player 0
    targets = [value for value, _, _ in game.make_target(0, 4, td_steps=2)]
    # i=0 (player 0): u_1 + u_2 = 0, bootstrap root value at 2 (player 0, same): +0.3.
    # i=1 (player 1): bootstrap at 3 (player 1): +0.4. i=2 (player 0): at 4 (player 0): +0.5.
    # i=3 (player 1): u_4 = 0, u_5 = +1 to player 0, the opponent: -1; no bootstrap past the end.
    # i=4 (player 0): u_5 = +1, its own: +1.
    assert targets == pytest.approx([0.3, 0.4, 0.5, -1.0, 1.0])
