"""muzero/progress.py: the progress line (percent, ETA, "-" for what is not known yet) and log.txt."""

from __future__ import annotations

import math

import pytest
from absl import logging

from muzero import progress
from muzero.progress import ProgressReporter, RecentRate, format_duration, log_to_file


def test_format_duration():
    # 3725 s = 1 h 2 min 5 s.
    assert format_duration(3725) == "1:02:05"
    assert format_duration(59.6) == "0:01:00"  # rounded to the second
    assert format_duration(float("nan")) == "-"
    assert format_duration(-1) == "-"


def test_recent_rate_forgets_what_is_older_than_its_window():
    rate = RecentRate(window=10)
    assert math.isnan(rate.rate())  # no two samples yet
    rate.add(0, 0)
    rate.add(5, 100)  # 100 events in 5 s
    assert rate.rate() == pytest.approx(20.0)
    rate.add(30, 130)
    rate.add(35, 140)
    # The samples at 0 and 5 are more than 10 s before 35: (140 - 130) / (35 - 30) = 2 per
    # second, not (140 - 0) / 35 = 4 since the start.
    assert rate.rate() == pytest.approx(2.0)


@pytest.fixture
def lines(monkeypatch):
    logged = []
    monkeypatch.setattr(logging, "info", lambda message, *args: logged.append(message % args))
    return logged


def test_progress_line_before_the_first_game_shows_dashes(lines, monkeypatch):
    clock = iter([100.0, 111.0])
    monkeypatch.setattr(progress.time, "time", lambda: next(clock))
    reporter = ProgressReporter(training_steps=200, every_seconds=10, step=0, moves=0, started=100.0)
    reporter.maybe_print(step=0, games=0, moves=40, metrics={}, batch_fraction=float("nan"))
    (line,) = lines
    # Nothing trained yet: 0.0 %, no ETA, no return, no loss, no batch fraction; 40 moves in 11 s = 4 moves/s.
    assert line.startswith("step 0/200 (0.0%) ETA - | games 0 | moves 40 | return(last 0) - | loss - | 4 moves/s")
    assert "batch - of a step" in line and "nan" not in line


def test_progress_line_percent_and_eta(lines, monkeypatch):
    clock = iter([0.0, 10.0, 20.0, 30.0])
    monkeypatch.setattr(progress.time, "time", lambda: next(clock))
    reporter = ProgressReporter(training_steps=200, every_seconds=5, step=0, moves=0, started=0.0)
    reporter.add_return(10.0)
    reporter.add_return(20.0)
    metrics = {"loss/total": 1.0, "loss/value": 0.5, "loss/reward": 0.25, "loss/policy": 0.25}
    reporter.maybe_print(step=20, games=2, moves=80, metrics=metrics, batch_fraction=0.25)
    reporter.maybe_print(step=50, games=3, moves=200, metrics=metrics, batch_fraction=0.25)
    # First line: 20 of 200 steps = 10 %; 20 steps in 10 s = 2 steps/s, 180 steps left: 90 s.
    assert lines[0].startswith("step 20/200 (10.0%) ETA 0:01:30 | games 2 | moves 80 | return(last 2) 15.0 |")
    # Second: 50 steps in 20 s = 2.5 steps/s over the window; 150 steps left: 60 s.
    assert lines[1].startswith("step 50/200 (25.0%) ETA 0:01:00 |")
    assert "loss 1.000 (v 0.500 r 0.250 p 0.250)" in lines[1] and "batch 0.25 of a step" in lines[1]
    # With the consistency loss on, its part follows the others.
    reporter.maybe_print(
        step=60, games=3, moves=240, metrics=dict(metrics, **{"loss/consistency": 0.125}), batch_fraction=0.25
    )
    assert "loss 1.000 (v 0.500 r 0.250 p 0.250 c 0.125)" in lines[2]


def test_log_to_file_appends_absl_lines(tmp_path):
    path = tmp_path / "log.txt"
    path.write_text("an earlier run's line\n")
    verbosity = logging.get_verbosity()
    logging.set_verbosity(logging.INFO)
    try:
        log_to_file(path)
        logging.info("hello %d", 42)
        log_to_file(tmp_path / "other.txt")  # a second file replaces the first
        logging.info("elsewhere")
    finally:
        logging.set_verbosity(verbosity)
        handler = progress._file_handler
        logging.get_absl_logger().removeHandler(handler)
        handler.close()
        progress._file_handler = None
    text = path.read_text().splitlines()
    assert text[0] == "an earlier run's line"
    assert len(text) == 2 and text[1].endswith("] hello 42")
    assert (tmp_path / "other.txt").read_text().rstrip().endswith("] elsewhere")
