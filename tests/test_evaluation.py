"""muzero/evaluation.py: which environment steps an evaluation's returns are logged against, and
which evaluation counts as done when a run resumes."""

from __future__ import annotations

import csv
import threading
from pathlib import Path

from muzero.config_loader import load_config
from muzero.evaluation import Evaluator

ROOT = Path(__file__).resolve().parents[1]


class HeldGame:
    """A finished greedy game: its return and its length are all the evaluator reads."""

    def __init__(self, value: float):
        self.value = value

    def episode_return(self) -> float:
        return self.value

    def __len__(self) -> int:
        return 10


class HeldPlayer:
    """A greedy player that plays only once `release` is set, as a long evaluation would."""

    side_by_side = False

    def __init__(self, release: threading.Event):
        self.release = release

    def play(self, network, environments, episodes, rng):
        assert self.release.wait(timeout=60)
        return [HeldGame(float(i)) for i in range(episodes)]


class Scalars:
    def __init__(self):
        self.written: list[tuple[int, dict]] = []

    def scalars(self, step: int, values: dict) -> None:
        self.written.append((step, values))


def test_a_background_evaluation_logs_the_environment_steps_of_its_network(tmp_path):
    config = load_config(ROOT / "configs" / "cartpole.yaml", ["run.eval_episodes=3"])
    release, summaries = threading.Event(), Scalars()
    evaluator = Evaluator(config.run, config.game, tmp_path, lambda games: HeldPlayer(release), summaries, seed=0)
    evaluator.start_file()
    counters = {"env_steps": 100, "eval_seconds": 0.0}
    assert evaluator.evaluate_in_background(7, None, counters, 4, 1.0)
    # Self-play goes on while the evaluation plays: 150 more moves before it ends.
    counters["env_steps"] = 250
    release.set()
    evaluator.join()
    # A synchronous evaluation (the interleaved loop): nothing moves meanwhile, the moves of now.
    evaluator.evaluate(8, None, counters, 5, 2.0)
    with open(tmp_path / "eval.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    # Step 7's network had seen 100 moves (not the 250 of when it finished); step 8's, 250.
    assert [(row["training_step"], row["env_steps"], row["games"]) for row in rows] == [
        ("7", "100", "4"),
        ("8", "250", "5"),
    ]
    # Returns 0, 1, 2: mean 1.00 each time; TensorBoard's by-environment-step curve at the same steps.
    assert [row["mean_return"] for row in rows] == ["1.00", "1.00"]
    by_env_step = [step for step, values in summaries.written if "eval/mean_return_by_env_step" in values]
    assert by_env_step == [100, 250]


def test_truncate_after_counts_the_evaluation_at_the_step_resumed_from_only_when_it_is_whole(tmp_path):
    # Tic-tac-toe evaluates against two opponents (random, perfect). Rows at steps 5 and 10 in
    # both files, but the match against `perfect` at step 10 was not written (a run killed
    # between the two matches): a resume at 10 must evaluate again, one at 5 need not.
    config = load_config(ROOT / "configs" / "tictactoe.yaml")
    own = "training_step,env_steps,games,wall_seconds,eval_seconds,mean_return,std_return\n"
    own += "5,40,8,3.0,1.0,0.25,0.50\n10,80,16,6.0,2.0,0.75,0.43\n"
    opponents = "training_step,env_steps,wall_seconds,opponent,side,games,win,draw,loss\n"
    opponents += "5,40,3.0,random,first,50,40,5,5\n5,40,3.0,perfect,first,50,0,50,0\n"
    opponents += "10,80,6.0,random,first,50,45,5,0\n"

    def resumed_at(step: int) -> Evaluator:
        (tmp_path / "eval.csv").write_text(own)
        (tmp_path / "eval_opponents.csv").write_text(opponents)
        evaluator = Evaluator(config.run, config.game, tmp_path, lambda games: HeldPlayer(None), Scalars(), seed=0)
        evaluator.truncate_after(step)
        return evaluator

    missing_a_match = resumed_at(10)
    assert (missing_a_match.last_step, missing_a_match.last) == (-1, None)
    # ...and its rows at step 10 go from both files: played again, it is logged once, whole.
    for name, steps in (("eval.csv", ["5"]), ("eval_opponents.csv", ["5", "5"])):
        with open(tmp_path / name, newline="") as f:
            assert [row["training_step"] for row in csv.DictReader(f)] == steps
    whole = resumed_at(5)
    # Step 5's row read back: mean 0.25, std 0.50; step 10's rows are dropped from both files.
    assert (whole.last_step, whole.last) == (5, (0.25, 0.5))
    with open(tmp_path / "eval_opponents.csv", newline="") as f:
        assert [row["training_step"] for row in csv.DictReader(f)] == ["5", "5"]
    # Nothing logged at the step resumed from: no evaluation counts as done.
    assert resumed_at(7).last_step == -1
