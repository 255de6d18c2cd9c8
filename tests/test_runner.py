"""Tests for muzero/runner.py: the replay ratio (what `train.steps_per_move` counts), progress lines
and `run.time_limit_minutes`."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from muzero.builder import build_trainer
from muzero.config_loader import load_config
from muzero.envs import EnvironmentSpec
from tests.helpers import TINY

SPEC = EnvironmentSpec((4,), np.float32, 2, 1)


def _steps_taken(tmp_path, *overrides: str) -> list[tuple[int, int, int]]:
    """(training step about to be taken, moves played, moves stored) at each training step of a
    tiny CartPole run with 8 games in progress, one move of each per self-play call."""
    settings = ["selfplay.batched=true", "selfplay.num_envs=8", "train.training_steps=40", *overrides]
    config = load_config(TINY, settings)
    seen: list[tuple[int, int, int]] = []

    def hook(batch):
        counters = trainer.state.counters
        seen.append((trainer.learner.training_step, counters["env_steps"], counters["stored_moves"]))
        return batch

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    trainer = build_trainer(config, run_dir, SPEC, batch_hook=hook)
    trainer.run()
    # Every move of a saved game was counted once: the stored moves are the replay's moves.
    assert trainer.state.counters["stored_moves"] == sum(len(game) for game in trainer.replay_buffer.games)
    return seen


def test_steps_per_move_counts_moves_played_by_default(tmp_path):
    seen = _steps_taken(tmp_path)
    # Step T is taken only while T < int(0.5 x moves played)...
    assert all(step < int(0.5 * played) for step, played, _ in seen)
    # ...and, with 8 games in progress, some are taken at or past half the moves stored.
    assert any(step >= int(0.5 * stored) for step, _, stored in seen)


def test_count_stored_moves_waits_for_the_games_in_progress(tmp_path):
    seen = _steps_taken(tmp_path, "train.count_stored_moves=true")
    # Step T is taken only while T < int(0.5 x moves of the games saved to replay), and those
    # fall behind the moves played while games are in progress.
    assert all(step < int(0.5 * stored) for step, _, stored in seen)
    assert any(stored < played for _, played, stored in seen)


def test_progress_lines_during_a_long_burst_of_training(tmp_path, caplog):
    import logging
    import re
    import time

    # 8 games must end before training starts (replay.min_games 8), and by then far more than
    # 80 moves were played: at 0.5 steps per move all 40 steps come in one burst, with no
    # self-play between them. A progress line is due every 0.1 s and each step takes 20 ms or
    # more, so lines must come from inside the burst, not only from between self-play calls.
    settings = ["selfplay.batched=true", "selfplay.num_envs=8", "train.training_steps=40", "replay.min_games=8"]
    config = load_config(TINY, [*settings, "run.log_every_seconds=0.1"])
    taken: list[tuple[int, int]] = []

    def slow_step(batch):
        taken.append((trainer.learner.training_step, trainer.state.counters["env_steps"]))
        time.sleep(0.02)
        return batch

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    trainer = build_trainer(config, run_dir, SPEC, batch_hook=slow_step)
    with caplog.at_level(logging.INFO, logger="absl"):  # absl's own logger: other tests may leave it at WARNING
        trainer.run()
    # The burst: steps taken with no move played between them (the same moves count).
    burst = [step for step, moves in taken if moves == taken[0][1]]
    assert burst == list(range(40)), taken[:3]
    # Lines printed after a step of the burst and before its last: steps 1..39. The run ends
    # with the burst, so the lines printed only between self-play calls were all at step 0.
    printed = [int(m.group(1)) for r in caplog.records if (m := re.match(r"step (\d+)/40 ", r.getMessage()))]
    inside = [step for step in printed if 1 <= step <= 39]
    assert len(inside) >= 3, printed


def test_time_limit_ends_the_run_and_a_resume_carries_its_time_on(tmp_path, monkeypatch):
    from types import SimpleNamespace

    # The loop's clock moves 1 s per training step and stands still otherwise (self-play,
    # checkpoints, compiling), so the budget is counted in steps: 0.1 minutes = 6 steps.
    clock = [1000.0]
    monkeypatch.setattr("muzero.runner.time", SimpleNamespace(time=lambda: clock[0]))

    def tick(batch):
        clock[0] += 1.0
        return batch

    settings = ["selfplay.batched=true", "selfplay.num_envs=8", "train.training_steps=1000"]
    run_dir = tmp_path / "run"
    run_dir.mkdir()

    def run(*overrides: str, resume: bool) -> dict:
        config = load_config(TINY, [*settings, *overrides])
        return build_trainer(config, run_dir, SPEC, resume=resume, batch_hook=tick).run()

    first = run("run.time_limit_minutes=0.1", resume=False)
    # Before step 7 the clock reads 6 s past the start: the 6 s budget is spent, 994 steps short.
    assert (first["training_step"], first["wall_seconds"], first["out_of_time"]) == (6, 6.0, True)
    assert first["stopped_by"] is None
    # Resumed with the same budget: the 6 s are carried on from the checkpoint, no step is taken.
    again = run("run.time_limit_minutes=0.1", resume=True)
    assert (again["training_step"], again["wall_seconds"], again["out_of_time"]) == (6, 6.0, True)
    # ...and plays no second final evaluation: one row at step 6, whose mean it reports (to the
    # 2 decimals eval.csv keeps).
    with open(run_dir / "eval.csv", newline="") as f:
        assert [row["training_step"] for row in csv.DictReader(f)] == ["6"]
    assert again["mean_return"] == pytest.approx(first["mean_return"], abs=0.005)
    # Resumed with 12 s and 9 training steps: steps 7-9 (6 + 3 = 9 s), ended by the steps, not by the clock.
    last = run("run.time_limit_minutes=0.2", "train.training_steps=9", resume=True)
    assert (last["training_step"], last["wall_seconds"], last["out_of_time"]) == (9, 9.0, False)
    with open(run_dir / "eval.csv", newline="") as f:
        assert [row["training_step"] for row in csv.DictReader(f)] == ["6", "9"]


def test_time_limit_stops_the_wait_for_actors_games(tmp_path, monkeypatch):
    from types import SimpleNamespace

    # On Ray the driver blocks in `source.play` until actors deliver games; the run's `_done`
    # (steps, signal, time limit) is what stops that wait. A concurrent source that delivers
    # the local games until the learner has taken 2 steps, then has none and polls `should_stop`,
    # the clock moving 1 s per poll and standing still otherwise: the 0.1-minute budget ends the
    # wait at the 6th poll, with the run's clock at 6.0 s.
    clock = [1000.0]
    monkeypatch.setattr("muzero.runner.time", SimpleNamespace(time=lambda: clock[0]))

    class StalledActors:
        concurrent = True

        def __init__(self, inner):
            self.inner, self.polls = inner, 0

        def play(self, storage, rng, should_stop, start_step):
            if start_step < 2:
                return self.inner.play(storage, rng, should_stop, start_step)
            while not should_stop():
                assert self.polls < 100, "the wait went on past the time limit"
                self.polls += 1
                clock[0] += 1.0
            return [], 0

        def __getattr__(self, name):  # state, metrics, progress, result, close: the local source's
            return getattr(self.inner, name)

    settings = ["selfplay.batched=true", "selfplay.num_envs=8", "train.training_steps=1000"]
    config = load_config(TINY, [*settings, "run.time_limit_minutes=0.1"])
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    trainer = build_trainer(config, run_dir, SPEC)
    trainer.source = source = StalledActors(trainer.source)
    result = trainer.run()
    assert source.polls == 6
    assert (result["wall_seconds"], result["out_of_time"], result["stopped_by"]) == (6.0, True, None)
    assert 2 <= result["training_step"] < 1000
