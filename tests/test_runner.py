"""Tests for muzero/runner.py's replay ratio: what `train.steps_per_move` counts."""

from __future__ import annotations

import numpy as np

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
