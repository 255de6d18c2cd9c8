"""Videos of the agent (muzero/video.py): upscaling, files that read back, recording a game."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from muzero.config import GameConfig
from muzero.video import (
    EvaluationVideos,
    RecordingEnvironment,
    VideoUnavailable,
    read_video,
    save_episodes,
    upscale,
    upscale_factor,
    video_suffix,
    write_video,
)


def frames_of_a_moving_square(count: int, size: int = 10) -> list[np.ndarray]:
    """`count` frames [size, size, 3]: black, with one red cell moving along the diagonal."""
    frames = []
    for t in range(count):
        frame = np.zeros((size, size, 3), np.uint8)
        frame[t % size, t % size] = (255, 0, 0)
        frames.append(frame)
    return frames


def test_the_suffix_follows_the_installed_encoders(monkeypatch):
    import importlib.util

    installed = {"PIL", "cv2"}
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: find_spec("json") if name in installed else None)
    # Both installed: mp4 first for episodes, GIF first for board games (`gif_first`).
    assert (video_suffix(), video_suffix(gif_first=True)) == (".mp4", ".gif")
    installed.discard("PIL")  # OpenCV alone: mp4 either way
    assert (video_suffix(), video_suffix(gif_first=True)) == (".mp4", ".mp4")
    installed.symmetric_difference_update({"PIL", "cv2"})  # Pillow alone: GIF either way
    assert (video_suffix(), video_suffix(gif_first=True)) == (".gif", ".gif")
    installed.clear()
    with pytest.raises(VideoUnavailable, match="needs opencv-python-headless \\(mp4\\) or pillow \\(gif\\)"):
        video_suffix(gif_first=True)


def test_upscale_factor_reaches_160_pixels_with_square_pixels():
    # ceil(160 / 10) = 16 (MinAtar); ceil(160 / 7) = 23 (7 * 23 = 161); 210 (ALE) and 400 (CartPole): 1.
    assert [upscale_factor(h) for h in (10, 7, 160, 210, 400)] == [16, 23, 1, 1, 1]
    frame = frames_of_a_moving_square(4)[3]  # the red cell at (3, 3)
    big = upscale(frame)
    assert big.shape == (160, 160, 3)
    # Cell (3, 3) becomes the 16x16 block of rows and columns 48..63, and nothing else is red.
    assert (big[48:64, 48:64] == (255, 0, 0)).all() and (big[..., 0] > 0).sum() == 16 * 16


def test_an_mp4_reads_back_with_every_frame_upscaled(tmp_path):
    pytest.importorskip("cv2")
    frames = frames_of_a_moving_square(12)
    path = write_video(frames, tmp_path / "clip.mp4", fps=15)
    video = read_video(path)
    # 12 frames of 10x10 -> 12 frames of 160x160.
    assert video.shape == (12, 160, 160, 3)
    # MPEG-4 is lossy: the red block of frame 5 (rows and columns 80..95) stays red within a margin,
    # away from its edges, and a far corner stays black.
    block = video[5, 84:92, 84:92].astype(int)
    assert (block[..., 0] > 180).all() and (block[..., 1:] < 80).all()
    assert video[5, :20, -20:].max() < 40


def test_a_gif_reads_back_exactly_and_odd_sides_are_padded_even(tmp_path):
    pytest.importorskip("PIL")
    # 7x7 frames: factor 23 gives 161x161, padded to 162x162 (codecs want even sides).
    frames = frames_of_a_moving_square(5, size=7)
    video = read_video(write_video(frames, tmp_path / "clip.gif", fps=10))
    assert video.shape == (5, 162, 162, 3)
    assert (video[2, 46:69, 46:69] == (255, 0, 0)).all()  # cell (2, 2): rows 2 * 23 .. 3 * 23 - 1


def test_recording_a_minatar_game_keeps_one_frame_per_move_plus_the_first(tmp_path):
    pytest.importorskip("minatar")
    from muzero.envs.minatar import MinAtarEnvironment, MinAtarSettings

    recorder = RecordingEnvironment(MinAtarEnvironment("breakout", 0, MinAtarSettings()))
    assert recorder.observation_shape == (10, 10, 4) and recorder.action_space_size == 3
    recorder.reset()
    for _ in range(3):
        recorder.step(0)
    recorder.reset()
    recorder.step(1)
    # Episode 1: the reset and 3 moves, 4 frames; episode 2: 2 frames.
    assert [len(episode) for episode in recorder.episodes] == [4, 2] and recorder.error is None
    assert all(frame.shape == (10, 10, 3) and frame.dtype == np.uint8 for frame in recorder.episodes[0])
    paths = save_episodes([recorder], tmp_path / "episodes")
    assert [path.name for path in paths] == ["episode-0.mp4", "episode-1.mp4"]
    assert [len(read_video(path)) for path in paths] == [4, 2]


def test_a_game_that_cannot_draw_itself_plays_on_and_is_warned_about_once(caplog, tmp_path):
    from tests.toy_game import LineWalk  # no render()

    recorder = RecordingEnvironment(LineWalk(seed=0))
    recorder.reset()
    assert recorder.step(1)[1] == 0.0 and recorder.error == "LineWalk has no render()"
    with pytest.raises(VideoUnavailable, match="cannot be recorded: LineWalk has no render"):
        save_episodes([recorder], tmp_path)  # `muzero evaluate --video`: one line, exit status 2

    videos = EvaluationVideos(GameConfig(id="tests.toy_game:make_line_walk", action_space_size=2), tmp_path, seed=0)
    with caplog.at_level(logging.WARNING):
        for step in (10, 20):
            for environment in videos.environments(step):
                environment.reset()
            assert videos.save(step) is None
    assert sum("no videos of the evaluations" in record.getMessage() for record in caplog.records) == 1
    assert videos.environments(30) == [] and not (tmp_path / "videos").exists()


def test_cartpole_records_when_pygame_is_installed():
    pytest.importorskip("pygame")
    from muzero.envs.gym import GymEnvironment

    recorder = RecordingEnvironment(GymEnvironment("CartPole-v1", 0))
    recorder.reset()
    recorder.step(0)
    # CartPole draws 400x600 frames; 50 frames per second (its render_fps).
    assert [frame.shape for frame in recorder.episodes[0]] == [(400, 600, 3)] * 2 and recorder.fps == 50.0


def test_atari_records_the_full_screen(tmp_path):
    pytest.importorskip("ale_py")
    from muzero.envs.atari import AtariEnvironment, AtariSettings

    recorder = RecordingEnvironment(AtariEnvironment("ALE/Pong-v5", 0, AtariSettings()))
    recorder.reset()
    for _ in range(3):
        recorder.step(0)
    # ALE draws its 210x160 screen (not the 96x96 observation): tall enough, not upscaled.
    (path,) = save_episodes([recorder], tmp_path)
    assert read_video(path).shape == (4, 210, 160, 3)
    # One frame per move of 4 emulator frames at the console's 60 per second: 15 per second,
    # real time.
    assert recorder.fps == 15.0


def test_board_games_drawn_as_text_are_not_recorded_with_a_plain_reason():
    from muzero.envs.openspiel import OpenSpielEnvironment

    recorder = RecordingEnvironment(OpenSpielEnvironment("tic_tac_toe"))
    recorder.reset()
    recorder.step(4)
    assert recorder.error == "it draws itself as text, not as images" and recorder.episodes == [[]]
