"""muzero/summaries.py: the figures computed for TensorBoard, the hparams entry, and the
resume truncation of tags logged against environment steps."""

from __future__ import annotations

import copy
import logging

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.plugins.hparams import metadata as hparams_metadata

from muzero.game import Game
from muzero.summaries import (
    ReplayFootprint,
    Summaries,
    SummaryWriteError,
    flatten_config,
    observation_frames,
    visit_entropy,
)


def _events(logdir) -> list:
    return [
        event
        for path in sorted(logdir.glob("events.out.tfevents.*"))
        for event in tf.compat.v1.train.summary_iterator(str(path))
    ]


def test_flatten_config():
    flat = flatten_config(
        {
            "train": {"batch_size": 8, "lr_init": 0.5},
            "network": {"hidden_layers": [16, 16]},
            "search": {"known_bounds": None},
            "game": {"kwargs": {}, "id": "CartPole-v1"},
        }
    )
    assert flat == {
        "train.batch_size": 8,
        "train.lr_init": 0.5,
        "network.hidden_layers": "[16, 16]",
        "search.known_bounds": "null",
        "game.kwargs": "{}",
        "game.id": "CartPole-v1",
    }


def test_visit_entropy():
    # Uniform over 4 actions: ln 4 = 1.386; all visits on one action: 0; mean of the two: 0.693.
    assert visit_entropy([[0.25] * 4]) == pytest.approx(np.log(4))
    assert visit_entropy([[0, 1, 0, 0]]) == 0.0
    assert visit_entropy([[0.25] * 4, [0, 1, 0, 0]]) == pytest.approx(np.log(4) / 2)


def test_observation_frames():
    assert observation_frames([np.zeros(4, np.float32)]) is None  # CartPole: not an image
    rgb = [np.full((6, 6, 3), i, np.uint8) for i in range(10)]
    frames = observation_frames(rgb)
    # 4 frames spread over moves 0..9: linspace(0, 9, 4) = 0, 3, 6, 9.
    assert frames.shape == (4, 6, 6, 3) and list(frames[:, 0, 0, 0]) == [0, 3, 6, 9]
    # MinAtar-like: 5 binary planes; a cell with planes 1 and 3 set is drawn at level 4/5 (the highest
    # set plane, 3, is the 4th of 5): 0.8 * 255 = 204.
    planes = np.zeros((2, 2, 5), bool)
    planes[0, 0, [1, 3]] = True
    (frame,) = observation_frames([planes])
    assert frame.shape == (2, 2, 1) and frame[0, 0, 0] == 204 and frame[1, 1, 0] == 0


def test_replay_footprint():
    game = Game(action_space_size=2, discount=1.0)
    game.observations = [np.zeros(4, np.float32)] * 3
    game.history, game.rewards, game.root_values = [0, 1], [1.0, 1.0], [0.5, 0.5]
    game.child_visits = [[0.5, 0.5]] * 2
    # 3 observations x 16 bytes = 48; actions, rewards, root values: 3 x 2 x 8 = 48; visits 2 x 2 x 8 = 32.
    assert ReplayFootprint.game_size(game) == (2, 128)
    other = copy.deepcopy(game)
    footprint = ReplayFootprint()
    assert footprint.measure([game, other]) == (4, 256)
    assert footprint.measure([other]) == (2, 128)  # a game gone from the buffer no longer counts


def test_hparams_entry_is_written(tmp_path):
    summaries = Summaries(str(tmp_path))
    summaries.hparams({"train.batch_size": 8, "game.id": "CartPole-v1"}, trial_id="run-1")
    summaries.close()
    (value,) = [
        value
        for event in _events(tmp_path)
        for value in event.summary.value
        if value.tag == hparams_metadata.SESSION_START_INFO_TAG
    ]
    info = hparams_metadata.parse_session_start_info_plugin_data(value.metadata.plugin_data.content)
    assert info.hparams["train.batch_size"].number_value == 8
    assert info.hparams["game.id"].string_value == "CartPole-v1"
    assert info.group_name == "run-1"


def test_truncate_after_keeps_env_step_tags_up_to_the_env_steps(tmp_path):
    summaries = Summaries(str(tmp_path))
    for step, env_steps in ((10, 40), (20, 80)):  # checkpoint at step 10 with 40 moves played
        summaries.scalars(step, {"loss/total": 1.0})
        summaries.scalars(env_steps, {"selfplay/episode_return_by_env_step": 9.0})
    summaries.close()
    Summaries.truncate_after(str(tmp_path), 10, env_steps=40)
    kept = sorted((value.tag, event.step) for event in _events(tmp_path) for value in event.summary.value)
    # Step 20 and env step 80 came after the checkpoint; env step 40 (> 10) is kept.
    assert kept == [("loss/total", 10), ("selfplay/episode_return_by_env_step", 40)]


def test_truncate_after_rewrites_only_what_it_cuts_and_keeps_records_before_a_cut_short_one(tmp_path):
    # Two runs' files: the first killed at step 20 (its last record cut short by the kill), the
    # second resumed from 10 and stopped at 15.
    for steps in ((5, 10, 20), (15,)):
        writer = Summaries(str(tmp_path / "writing"))
        for step in steps:
            writer.scalars(step, {"loss/total": float(step)})
        writer.close()
        for path in (tmp_path / "writing").iterdir():
            path.rename(tmp_path / f"{path.name}.{len(steps)}")  # one name each (made in the same second)
    first, second = sorted(tmp_path.glob("events.out.tfevents.*"), key=lambda p: -int(p.name.rpartition(".")[2]))
    first.write_bytes(first.read_bytes()[:-3])  # step 20's record cut short
    inode = second.stat().st_ino
    Summaries.truncate_after(str(tmp_path), 15)
    steps = sorted(event.step for event in _events(tmp_path) for value in event.summary.value)
    assert steps == [5, 10, 15]
    # Nothing to drop in the second file: left as it was (found by scripts/soak.py: every resume
    # rewrote every file, a minute per 40 MB of events after an hour of faults).
    assert second.stat().st_ino == inode


def test_a_full_disk_is_one_line_and_close_only_warns(tmp_path, monkeypatch, caplog):
    # Found by scripts/soak.py: with the run folder's disk full, TensorFlow's flush error
    # (its message as TensorFlow 2.21 words it on a full tmpfs) ended the run with a traceback.
    summaries = Summaries(str(tmp_path))
    events = tmp_path / "events.out.tfevents.1.vm.2.0.v2"

    def full_disk(self):
        raise tf.errors.ResourceExhaustedError(
            None,
            None,
            "{{function_node __wrapped__FlushSummaryWriter_device_/job:localhost/replica:0/task:0/device:CPU:0}} "
            f"{events}; No space left on device\n\tFailed to flush 4 events to {events}\n\t"
            "Could not flush events file. [Op:FlushSummaryWriter] name: ",
        )

    monkeypatch.setattr(type(summaries._writer), "flush", full_disk)
    monkeypatch.setattr(type(summaries._writer), "close", full_disk)
    with pytest.raises(SummaryWriteError) as info:
        summaries.scalars(1, {"loss/total": 1.0})
    assert str(info.value) == f"cannot write TensorBoard's events in {tmp_path}: {events}; No space left on device"
    # Closing (in the loop's `finally`, after the stop) must not replace the error being raised.
    with caplog.at_level(logging.WARNING):
        summaries.close()
    assert f"TensorBoard's last events in {tmp_path} not written: {events}; No space left on device" in caplog.text
