"""The exact match (`muzero.exact_match`): outcomes summed over the game tree, checked by hand
and against a plain recursion that merges nothing."""

from __future__ import annotations

import pyspiel
import pytest

from muzero.arena import OpponentError
from muzero.config_loader import load_config
from muzero.envs import check_environment
from muzero.exact_match import expected_outcome, muzero_chooser
from muzero.greedy import make_greedy_player
from tests.helpers import TICTACTOE, load_script, tictactoe_after
from tests.test_arena import OracleNetwork

GAME = pyspiel.load_game("tic_tac_toe")


def lowest(states):
    return [min(state.legal_actions()) for state in states]


def highest(states):
    return [max(state.legal_actions()) for state in states]


# x on 0, 4, 5 and o on 1, 2, 3, x to move, cells 6, 7, 8 empty:
#   x o o
#   o x x
#   . . .
LATE = (0, 1, 4, 2, 5, 3)


@pytest.mark.parametrize(
    "choose, opponent, expected",
    [
        # x takes 6 (no line: 2 and 3 are o's). o random on 7 or 8, 1/2 each: after o 7, x's
        # last move 8 completes 0-4-8 (a win); after o 8, x's 7 completes nothing (a draw).
        (lowest, "random", (0.5, 0.5, 0.0)),
        # The perfect o sees that 7 loses to 8 and plays 8: a draw.
        (lowest, "perfect", (0.0, 1.0, 0.0)),
        # x takes 8 at once: 0-4-8, a win whatever the opponent.
        (highest, "random", (1.0, 0.0, 0.0)),
        (highest, "perfect", (1.0, 0.0, 0.0)),
    ],
)
def test_a_late_position_worked_by_hand(choose, opponent, expected):
    assert expected_outcome(GAME, choose, opponent, player=0, start=tictactoe_after(*LATE)) == pytest.approx(expected)


def test_the_cap_on_moves_counts_a_draw():
    # Capped at the start's 6 moves: nothing is played, the game counts as drawn.
    assert expected_outcome(GAME, lowest, "random", player=0, start=tictactoe_after(*LATE), max_moves=6) == (
        0.0,
        1.0,
        0.0,
    )


def _recursive(state, player: int) -> tuple[float, float, float]:
    """The same expectation by plain recursion over move sequences (no merging, no batching)."""
    if state.is_terminal():
        result = state.player_return(player)
        return float(result > 0), float(result == 0), float(result < 0)
    if state.current_player() == player:
        return _recursive(state.child(min(state.legal_actions())), player)
    children = [_recursive(state.child(action), player) for action in state.legal_actions()]
    return tuple(sum(child[i] for child in children) / len(children) for i in range(3))


@pytest.mark.parametrize("player", [0, 1])
def test_the_whole_game_equals_a_plain_recursion(player):
    calls = []

    def counting_lowest(states):
        calls.append(len(states))
        return lowest(states)

    exact = expected_outcome(GAME, counting_lowest, "random", player=player)
    assert exact == pytest.approx(_recursive(GAME.new_initial_state(), player), abs=1e-12)
    assert sum(exact) == pytest.approx(1.0)
    # One call per depth at which the player moves: x at 0, 2, 4, 6, 8; o at 1, 3, 5, 7.
    assert len(calls) == (5 if player == 0 else 4)


def test_unknown_opponents_are_refused():
    with pytest.raises(OpponentError, match="expected random or perfect"):
        expected_outcome(GAME, lowest, "mcts:10", player=0)


def test_the_match_summary():
    summary = load_script("exact_match").match_summary((0.0, 1.0, 0.0), (0.0, 0.99, 0.01))
    # 50 games from each side: 50 * 0.01 = 0.5 expected losses; no loss in 100: 0.99 ** 50.
    assert summary["loss"] == pytest.approx(0.5) and summary["draw"] == pytest.approx(99.5)
    assert summary["p_no_loss"] == pytest.approx(0.99**50)


@pytest.mark.parametrize("batched", ["true", "false"])  # the batched search 16 positions at a time, or run_mcts
def test_with_a_perfect_model_muzero_never_loses_to_any_line_of_the_perfect_player(batched):
    # test_arena's oracle (real rules, exact values) behind MuZero's search: every line the
    # perfect player may choose, from both sides, is a draw (the sampled match in test_arena
    # sees 8 games of them).
    config = load_config(TICTACTOE, ["search.num_simulations=50", f"selfplay.batched={batched}"])
    player = make_greedy_player(config, check_environment(config.game), 16)
    choose = muzero_chooser(config.game, player, OracleNetwork(), batch=16)
    for player in (0, 1):
        assert expected_outcome(GAME, choose, "perfect", player=player) == pytest.approx((0.0, 1.0, 0.0))
