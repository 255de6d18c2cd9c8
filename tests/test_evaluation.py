"""muzero/evaluation.py: which environment steps an evaluation's returns are logged against."""

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
