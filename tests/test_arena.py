"""Tests for muzero/arena.py (MuZero against OpenSpiel's bots and a perfect player) and
muzero/play.py (a person against the agent), and the commands that use them."""

from __future__ import annotations

import csv
import io

import numpy as np
import pyspiel
import pytest

import muzero.arena as arena
from muzero.arena import OpponentError, PerfectPlayer, make_opponent, play_match
from muzero.config_io import load_config
from muzero.networks.base import UniformNetwork
from muzero.play import play
from tests.helpers import TICTACTOE, muzero_command

CONFIG = load_config(TICTACTOE, ["search.num_simulations=8"])


def _state(*actions: int):
    state = pyspiel.load_game("tic_tac_toe").new_initial_state()
    for action in actions:
        state.apply_action(action)
    return state


def test_perfect_player_knows_every_optimal_move():
    player = PerfectPlayer(pyspiel.load_game("tic_tac_toe"), np.random.default_rng(0))
    # Tic-tac-toe is a draw: every first move keeps the draw (value 0).
    assert player.optimal_actions(_state()) == list(range(9))
    # Against a corner opening only the centre draws; against an edge opening (x at 1), the
    # centre, the two corners beside it and the opposite edge (0, 2, 4, 7) draw.
    assert player.optimal_actions(_state(0)) == [4]
    assert player.optimal_actions(_state(1)) == [0, 2, 4, 7]
    # x (0, 1) against o (3, 4), x to move: only completing the top row (2) wins.
    assert player.optimal_actions(_state(0, 3, 1, 4)) == [2]
    assert len(player.values) == 4520  # non-terminal positions reachable in tic-tac-toe


def test_perfect_player_picks_uniformly_among_optimal_moves():
    player = PerfectPlayer(pyspiel.load_game("tic_tac_toe"), np.random.default_rng(1))
    picks = [player(_state(1)) for _ in range(400)]
    # 4 optimal replies, 100 expected each; 3.5 standard deviations (sqrt(400 * 1/4 * 3/4) = 8.7) is 30.
    assert set(picks) == {0, 2, 4, 7} and all(abs(picks.count(a) - 100) < 30 for a in (0, 2, 4, 7))


def test_counts_per_side_with_scripted_players(monkeypatch):
    # MuZero replaced by the perfect player: perfect against perfect is always a draw.
    perfect = PerfectPlayer(pyspiel.load_game("tic_tac_toe"), np.random.default_rng(2))
    monkeypatch.setattr(arena, "muzero_action", lambda config, network, game: perfect(game.environment.state))
    result = play_match(CONFIG, UniformNetwork(9), "perfect", games=10, seed=0)
    assert result.counts == {"first": {"win": 0, "draw": 5, "loss": 0}, "second": {"win": 0, "draw": 5, "loss": 0}}
    assert result.score() == 0.5 and result.rows("perfect")[1] == ["perfect", "second", 5, 0, 5, 0]
    # MuZero replaced by "the lowest legal square": x plays 0, 1, 2 in a row unless blocked; it
    # never beats the perfect player, and loses some games as the second player.
    monkeypatch.setattr(arena, "muzero_action", lambda config, network, game: game.legal_actions()[0])
    result = play_match(CONFIG, UniformNetwork(9), "perfect", games=10, seed=0)
    assert result.total("win") == 0 and result.counts["second"]["loss"] > 0


def test_opponents_by_name():
    game = pyspiel.load_game("tic_tac_toe")
    assert make_opponent("random", game, 0)(_state(0, 4)) in [1, 2, 3, 5, 6, 7, 8]
    # OpenSpiel's MCTS with 200 simulations finds the only winning move (2).
    assert make_opponent("mcts:200", game, 0)(_state(0, 3, 1, 4)) == 2
    for bad in ("mcts:0", "mcts", "alphabeta"):
        with pytest.raises(OpponentError, match="expected random, perfect or mcts:N"):
            make_opponent(bad, game, 0)


def test_play_reads_moves_and_asks_again():
    # The agent plays second with the uniform network; the person types an unknown word,
    # then tries every square in order: taken squares are refused and asked again.
    moves = "zz\nx(1,1)\n" + "\n".join(str(a) for a in range(9)) * 2 + "\n"
    out = io.StringIO()
    outcome = play(CONFIG, UniformNetwork(9), True, io.StringIO(moves), out)
    text = out.getvalue()
    assert "'zz' is not a legal move here." in text and "x(1,1) (4)" in text  # the legal moves listed
    assert text.count("MuZero plays o(") >= 2 and outcome in (-1, 0, 1)
    assert text.strip().splitlines()[-1] in ("You win.", "Draw.", "MuZero wins.")
    with pytest.raises(EOFError):
        play(CONFIG, UniformNetwork(9), True, io.StringIO("4\n"), io.StringIO())


@pytest.mark.slow
def test_evaluate_against_an_opponent_and_play_through_the_cli(tictactoe_tiny_run, tmp_path):
    run_dir = tictactoe_tiny_run
    # Training evaluated against the random player at step 20: 4 games, 2 per side.
    rows = list(csv.DictReader((run_dir / "eval_opponents.csv").open()))
    assert [(row["training_step"], row["opponent"], row["side"], row["games"]) for row in rows] == [
        ("20", "random", "first", "2"), ("20", "random", "second", "2")]
    assert all(sum(int(row[k]) for k in ("win", "draw", "loss")) == 2 for row in rows)

    table = tmp_path / "table.csv"
    result = muzero_command("evaluate", "--run", str(run_dir), "--opponent", "mcts:10", "--games", "4",
                            "--csv", str(table))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "against mcts:10, 4 games" in result.stdout and "total" in result.stdout
    written = list(csv.DictReader(table.open()))
    assert [row["side"] for row in written] == ["first", "second"] and written[0]["training_step"] == "20"

    moves = "\n".join(str(a) for a in range(9)) * 2 + "\n"
    result = muzero_command("play", "--run", str(run_dir), "--second", input_text=moves)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "You play second" in result.stdout and result.stdout.strip().splitlines()[-1] in (
        "You win.", "Draw.", "MuZero wins.")

    for args, fragment in ((["--opponent", "chess_engine"], "--opponent: unknown opponent 'chess_engine'"),
                           (["--opponent", "random", "--games", "1"], "--games: expected an integer >= 2")):
        result = muzero_command("evaluate", "--run", str(run_dir), *args)
        assert result.returncode == 2 and fragment in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_board_game_commands_refuse_other_games(tiny_run):
    result = muzero_command("play", "--run", str(tiny_run))
    assert result.returncode == 2
    assert "play: only for two-player board games (game.id openspiel:...)" in result.stderr
