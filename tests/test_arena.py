"""Tests for muzero/arena.py (MuZero against OpenSpiel's bots and a perfect player) and
muzero/play.py (a person against the agent), and the commands that use them."""

from __future__ import annotations

import csv
import io

import numpy as np
import pyspiel
import pytest

from muzero.arena import (
    BOARD_FPS,
    HOLD_SECONDS,
    OpponentError,
    PerfectPlayer,
    check_match_videos,
    game_frames,
    make_opponent,
    play_match,
    save_match_videos,
)
from muzero.config_loader import load_config
from muzero.envs import check_environment
from muzero.envs.openspiel import CELL_PIXELS, FRAME_COLOURS, OpenSpielEnvironment
from muzero.greedy import GreedyPlayer, ReferencePlayer, make_greedy_player
from muzero.networks.base import UniformNetwork
from muzero.play import play
from muzero.video import VideoUnavailable, read_video, upscale, video_suffix
from tests.helpers import CONNECT4, TICTACTOE, TINY, muzero_command

CONFIG = load_config(TICTACTOE, ["search.num_simulations=8", "selfplay.batched=false"])


class ScriptedPlayer(GreedyPlayer):
    """MuZero's moves scripted: `choose(game)` in each game, no search; records each call's game count."""

    def __init__(self, choose):
        self.choose, self.calls = choose, []

    def moves(self, network, games):
        self.calls.append(len(games))
        return [self.choose(game) for game in games]


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


def test_counts_per_side_with_scripted_players():
    # MuZero replaced by the perfect player: perfect against perfect is always a draw.
    perfect = PerfectPlayer(pyspiel.load_game("tic_tac_toe"), np.random.default_rng(2))
    player = ScriptedPlayer(lambda game: perfect(game.environment.state))
    result = play_match(CONFIG.game, player, UniformNetwork(9), "perfect", games=10, seed=0)
    assert result.counts == {"first": {"win": 0, "draw": 5, "loss": 0}, "second": {"win": 0, "draw": 5, "loss": 0}}
    assert result.score() == 0.5 and result.rows("perfect")[1] == ["perfect", "second", 5, 0, 5, 0]
    # MuZero replaced by "the lowest legal square": x plays 0, 1, 2 in a row unless blocked; it
    # never beats the perfect player, and loses some games as the second player.
    player = ScriptedPlayer(lambda game: game.legal_actions()[0])
    result = play_match(CONFIG.game, player, UniformNetwork(9), "perfect", games=10, seed=0)
    assert result.total("win") == 0 and result.counts["second"]["loss"] > 0


def test_an_odd_number_of_games_and_games_cut_at_max_moves():
    # 5 games: MuZero moves first in (5 + 1) // 2 = 3, second in 2. Every game is cut after
    # max_moves = 3 moves (tic-tac-toe needs 5 for a win): not ended, so each counts as a draw.
    config = load_config(TICTACTOE, ["game.max_moves=3", "selfplay.batched=false"])
    player = ScriptedPlayer(lambda game: game.legal_actions()[0])  # the lowest legal square
    result = play_match(config.game, player, UniformNetwork(9), "random", games=5, seed=0)
    assert result.counts == {"first": {"win": 0, "draw": 3, "loss": 0}, "second": {"win": 0, "draw": 2, "loss": 0}}
    # All games side by side: MuZero moves at plies 1 and 3 as first player (3 games) and at
    # ply 2 as second (2 games); a round searches every game waiting for MuZero: [5, 3].
    assert player.calls == [5, 3]


def test_each_game_of_a_match_is_kept_and_drawn(tmp_path):
    # MuZero as "the lowest legal square" against the random player, one game from each side.
    player = ScriptedPlayer(lambda game: game.legal_actions()[0])
    result = play_match(CONFIG.game, player, UniformNetwork(9), "random", games=2, seed=3)
    assert [record[0] for record in result.records] == ["first", "second"]
    for side, outcome, actions in result.records:
        assert result.counts[side][outcome] == 1
        # The record replays the game: MuZero's moves are the plies 0, 2, 4, ... as first
        # player (1, 3, ... as second), the lowest legal square each time; a decided game
        # lasts 5 moves or more, a draw all 9.
        for ply in range(0 if side == "first" else 1, len(actions), 2):
            assert actions[ply] == min(set(range(9)) - set(actions[:ply]))
        assert 5 <= len(actions) <= 9 and (len(actions) == 9 or outcome != "draw")
    side, outcome, actions = result.records[0]
    frames = game_frames(CONFIG.game, actions)
    # The empty board, then one frame a move; MuZero's first move (square 0, the top left) is red.
    assert len(frames) == len(actions) + 1 and actions[0] == 0
    middle = CELL_PIXELS // 2
    assert tuple(frames[0][middle, middle]) == tuple(FRAME_COLOURS["empty"])
    assert tuple(frames[1][middle, middle]) == tuple(FRAME_COLOURS["player 0"])
    # x's stones after the last move: ceil(moves / 2) red discs, the other player's floor(moves / 2) yellow.
    centres = frames[-1][middle::CELL_PIXELS, middle::CELL_PIXELS].reshape(9, 3).tolist()
    assert centres.count(FRAME_COLOURS["player 0"].tolist()) == (len(actions) + 1) // 2
    assert centres.count(FRAME_COLOURS["player 1"].tolist()) == len(actions) // 2

    image_module = pytest.importorskip("PIL.Image")  # the GIFs need Pillow (matplotlib's, in `.[all]`)
    paths = save_match_videos(result, CONFIG.game, tmp_path)
    names = [f"game-{i}-{side}-{outcome}.gif" for i, (side, outcome, _) in zip(("001", "002"), result.records)]
    assert [path.name for path in paths] == names
    # The GIF holds the frames exactly (four colours; tic-tac-toe's 48 pixels upscaled 4
    # times to 192, at least 160). Each move shows 1 / BOARD_FPS = 500 ms, and the final
    # position HOLD_SECONDS (2 s) more: (moves + 1) x 500 + 2,000 ms in all. (Pillow merges
    # the held copies of the last frame into it, so the distinct frames are compared.)
    video = read_video(paths[0])
    distinct = [frame for i, frame in enumerate(video) if i == 0 or (frame != video[i - 1]).any()]
    assert video.shape[1:] == (192, 192, 3) and len(distinct) == len(frames)
    assert all((shown == upscale(drawn)).all() for shown, drawn in zip(distinct, frames))
    with image_module.open(paths[0]) as image:
        durations = [image.seek(i) or image.info["duration"] for i in range(image.n_frames)]
    assert (BOARD_FPS, HOLD_SECONDS) == (2.0, 2.0) and sum(durations) == (len(actions) + 1) * 500 + 2000


def test_a_match_that_cannot_be_drawn_is_refused_before_it_is_played(tmp_path):
    # Breakthrough's stone planes are not known here: no picture, one line.
    with pytest.raises(VideoUnavailable, match="breakthrough: which planes hold the stones is not known here"):
        check_match_videos(OpenSpielEnvironment("breakthrough"), tmp_path)
    check_match_videos(OpenSpielEnvironment("tic_tac_toe"), tmp_path)  # an empty directory: fine
    check_match_videos(OpenSpielEnvironment("tic_tac_toe"), tmp_path / "not yet made")
    # A directory holding another match's videos: the new ones would mix with them.
    (tmp_path / "game-001-first-win.gif").write_bytes(b"")
    with pytest.raises(VideoUnavailable, match="already holds the videos of a match"):
        check_match_videos(OpenSpielEnvironment("tic_tac_toe"), tmp_path)


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
    outcome = play(CONFIG.game, ReferencePlayer(CONFIG), UniformNetwork(9), True, io.StringIO(moves), out)
    text = out.getvalue()
    assert "'zz' is not a legal move here." in text and "x(1,1) (4)" in text  # the legal moves listed
    assert text.count("MuZero plays o(") >= 2 and outcome in (-1, 0, 1)
    assert text.strip().splitlines()[-1] in ("You win.", "Draw.", "MuZero wins.")
    with pytest.raises(EOFError):
        play(CONFIG.game, ReferencePlayer(CONFIG), UniformNetwork(9), True, io.StringIO("4\n"), io.StringIO())


@pytest.mark.slow
def test_evaluate_against_an_opponent_and_play_through_the_cli(tictactoe_tiny_run, tmp_path):
    run_dir = tictactoe_tiny_run
    # Training evaluated against the random player at step 20: 4 games, 2 per side.
    rows = list(csv.DictReader((run_dir / "eval_opponents.csv").open()))
    assert [(row["training_step"], row["opponent"], row["side"], row["games"]) for row in rows] == [
        ("20", "random", "first", "2"),
        ("20", "random", "second", "2"),
    ]
    assert all(sum(int(row[k]) for k in ("win", "draw", "loss")) == 2 for row in rows)

    table, videos = tmp_path / "table.csv", tmp_path / "videos"
    suffix = video_suffix(gif_first=True)  # .gif with Pillow, else .mp4
    result = muzero_command(
        "evaluate", "--run", str(run_dir), "--opponent", "mcts:10", "--games", "4", "--csv", str(table),
        "--video", str(videos),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "against mcts:10, 4 games" in result.stdout and "total" in result.stdout
    written = list(csv.DictReader(table.open()))
    assert [row["side"] for row in written] == ["first", "second"] and written[0]["training_step"] == "20"
    # One video per game, named by MuZero's side and outcome: the same counts as the table's.
    names = sorted(path.name for path in videos.iterdir())
    assert [name[:14] for name in names] == ["game-001-first", "game-002-first", "game-003-secon", "game-004-secon"]
    for row in written:
        for outcome in ("win", "draw", "loss"):
            assert sum(name.endswith(f"-{row['side']}-{outcome}{suffix}") for name in names) == int(row[outcome])
    # The same directory again: refused before the match, in one line (nothing overwritten).
    result = muzero_command("evaluate", "--run", str(run_dir), "--opponent", "random", "--video", str(videos))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "already holds the videos of a match" in result.stderr and sorted(p.name for p in videos.iterdir()) == names
    # The run's own budget (tictactoe_tiny_run: search.num_simulations 4) unless --simulations says.
    assert [row["simulations"] for row in written] == ["4", "4"]
    result = muzero_command(
        "evaluate", "--run", str(run_dir), "--opponent", "random", "--games", "2", "--csv", str(table),
        "--simulations", "7", "--step", "10",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "7 simulations per move" in result.stdout
    # The older kept checkpoint (10 and 20 are complete: train.checkpoint_interval 10) by its step.
    rows = list(csv.DictReader(table.open()))
    assert [(row["simulations"], row["training_step"]) for row in rows] == [("7", "10"), ("7", "10")]
    for command in ("evaluate", "play"):
        result = muzero_command(command, "--run", str(run_dir), "--simulations", "0")
        assert result.returncode == 2 and "--simulations: expected an integer >= 1, got 0" in result.stderr

    moves = "\n".join(str(a) for a in range(9)) * 2 + "\n"
    # The run keeps the checkpoints at steps 10 and 20 (train.checkpoint_interval 10): not 3.
    result = muzero_command("play", "--run", str(run_dir), "--step", "3")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    checkpoints = run_dir / "checkpoints"
    refusal = f"muzero play: error: --step 3: no complete checkpoint at that step in {checkpoints} (complete: 10, 20)"
    assert result.stderr.strip().splitlines() == [refusal]
    result = muzero_command("play", "--run", str(run_dir), "--second", "--step", "10", input_text=moves)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "You play second" in result.stdout and result.stdout.strip().splitlines()[-1] in (
        "You win.",
        "Draw.",
        "MuZero wins.",
    )

    for args, fragment in (
        (["--opponent", "chess_engine"], "--opponent: unknown opponent 'chess_engine'"),
        (["--opponent", "random", "--games", "1"], "--games: expected an integer >= 2"),
    ):
        result = muzero_command("evaluate", "--run", str(run_dir), *args)
        assert result.returncode == 2 and fragment in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_board_game_commands_refuse_other_games(tiny_run):
    result = muzero_command("play", "--run", str(tiny_run))
    assert result.returncode == 2
    assert "play: only for two-player board games (game.id openspiel:...)" in result.stderr


class OracleNetwork:
    """A perfect model of tic-tac-toe behind the pseudocode's Network interface: the hidden
    state is the list of moves so far (+1, 0 for none) and an "ended" flag; the dynamics
    applies the real rules; the reward is the mover's (+1 for a winning move); the value is
    the exact negamax value for the player to move (0 once the game ended); the policy is
    uniform over the legal moves. (With a uniform policy over all 9 actions, illegal moves
    inside the tree, absorbing states of value 0, dilute a 50-simulation search enough to
    miss a forced block in some positions: a search property, not a sign convention.) With it, only the search's two-player conventions decide how MuZero plays."""

    def __init__(self):
        self.game = pyspiel.load_game("tic_tac_toe")
        self.solver = PerfectPlayer(self.game, np.random.default_rng(0))

    def _state(self, hidden):
        state = self.game.new_initial_state()
        for move in hidden[:9]:
            if move > 0:
                state.apply_action(int(move) - 1)
        return state

    def _output(self, hidden: list, rewards: list):
        from muzero.networks.base import NetworkOutput

        values, logits = [], np.zeros((len(hidden), 9))
        for row, h in enumerate(hidden):
            state = self._state(h)
            ended = h[9] or state.is_terminal()
            values.append(0.0 if ended else self.solver.solve(state))
            if not ended:  # prior 0 on illegal moves, as a trained policy learns (its targets are 0 there)
                logits[row, [a for a in range(9) if a not in state.legal_actions()]] = -1e9
        return NetworkOutput(np.array(values), np.array(rewards), logits, np.array(hidden))

    def initial_inference(self, observation):
        hidden = []
        for o in observation:  # planes (empty, opponent's, mover's), then the mover (1: o)
            planes = o[:27].reshape(3, 9)
            x_plane, o_plane = (2, 1) if o[27] == 0 else (1, 2)
            # x moved first: interleave x's and o's cells.
            xs, os_ = list(np.flatnonzero(planes[x_plane])), list(np.flatnonzero(planes[o_plane]))
            moves = [cell for pair in zip(xs, os_ + [None]) for cell in pair if cell is not None]
            h = np.zeros(10)
            h[: len(moves)] = np.array(moves) + 1
            hidden.append(h)
        return self._output(hidden, [0.0] * len(hidden))

    def recurrent_inference(self, hidden_state, action):
        hidden, rewards = [], []
        for h, a in zip(hidden_state, action):
            h, state = np.array(h), self._state(h)
            if h[9] or state.is_terminal() or int(a) not in state.legal_actions():
                h[9] = 1  # past the end: absorbing
                hidden.append(h), rewards.append(0.0)
                continue
            mover = state.current_player()
            h[int((h[:9] > 0).sum())] = int(a) + 1
            state.apply_action(int(a))
            hidden.append(h), rewards.append(float(state.rewards()[mover]))
        return self._output(hidden, rewards)

    def training_steps(self) -> int:
        return 0


@pytest.mark.parametrize("batched", ["true", "false"])  # the batched search, or run_mcts game by game
@pytest.mark.parametrize("rule", ["negamax", "pseudocode"])
def test_with_a_perfect_model_the_negamax_search_plays_perfectly(rule, batched):
    config = load_config(
        TICTACTOE, ["search.num_simulations=50", f"search.two_player_rule={rule}", f"selfplay.batched={batched}"]
    )
    player = make_greedy_player(config, check_environment(config.game), 8)
    result = play_match(config.game, player, OracleNetwork(), "perfect", games=8, seed=3)
    if rule == "negamax":
        # Values from the player to move's point of view, rewards signed by their mover: the
        # search finds the game-theoretic moves, and perfect against perfect is a draw.
        assert result.counts == {"first": {"win": 0, "draw": 4, "loss": 0}, "second": {"win": 0, "draw": 4, "loss": 0}}
    else:
        # The pseudocode's rule picks the moves best for the opponent: it loses.
        assert result.total("loss") >= 6


def test_the_arenas_compiled_search_runs_a_resnet_as_the_reference_search_does():
    # Arena matches search all games at once with the compiled search, the only one that runs
    # a resnet's published weights; its moves must be the reference search's (`run_mcts` on
    # the Keras network itself) in positions of every stage of a game.
    from muzero.arena import board_game
    from muzero.factories import make_run_network
    from muzero.game import Game

    config = load_config(
        TICTACTOE,
        [
            "network.kind=resnet",
            "network.downsample=false",
            "network.planes=4",
            "network.hidden_layers=[8]",
            "search.num_simulations=12",
        ],
    )
    spec = check_environment(config.game, network=config.network)
    network = make_run_network(config, spec)
    games = []
    for history in ([], [4], [0, 4, 8], [0, 1, 3, 4, 2], [4, 0, 8, 2, 1, 7]):
        game = Game(9, 1.0, board_game(config.game), 1)
        for action in history:
            game.apply(action)
        games.append(game)
    player = make_greedy_player(config, spec, len(games))
    assert type(player.searcher).__name__ == "CompiledSearcher"
    expected = ReferencePlayer(config).moves(network, games)
    assert player.moves(network.published_network(0), games) == expected
    assert all(action in game.legal_actions() for action, game in zip(expected, games))


@pytest.mark.parametrize(
    "config, opponents, fragment",
    [
        # Connect four has about 4.5e12 positions: the solver gives up at PERFECT_PLAY_LIMIT.
        (CONNECT4, "[mcts:200, perfect]", "run.eval_opponents[1]: perfect: the game has more than 200,000 positions"),
        (
            TINY,
            "[random]",
            "run.eval_opponents[0]: only for two-player board games (game.id openspiel:...), not CartPole",
        ),
    ],
)
def test_an_opponent_the_first_evaluation_could_not_make_is_refused_at_the_start(tmp_path, config, opponents, fragment):
    result = muzero_command(
        "train", "--config", config, "--set", f"run.eval_opponents={opponents}", "--logdir", str(tmp_path / "run")
    )
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--set run.eval_opponents={opponents}: {fragment}" in lines[0], lines
    assert not (tmp_path / "run").exists()
