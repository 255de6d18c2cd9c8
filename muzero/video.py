"""Videos of the agent: greedy episodes drawn frame by frame into mp4 files.

A game draws itself through `render()` (gymnasium's "rgb_array" rendering: uint8
[H, W, 3]); `RecordingEnvironment` wraps an environment and keeps one frame after each
reset and each step, as gymnasium's `RecordVideo` does, without touching the game. Frames
are upscaled by an integer factor (nearest neighbour) to at least `MIN_HEIGHT` pixels, so
MinAtar's 10x10 frames become 160x160 squares a person can follow, and written with
OpenCV's MPEG-4 encoder (opencv-python-headless, the `atari` extra, bundles FFmpeg). Without
OpenCV, a GIF is written with Pillow instead.

Three users:
* training (`EvaluationVideos`): every evaluation plays one more greedy episode beside
  the scored ones, in a fresh environment of its own, into RUN_DIR/videos/step-<N>.mp4;
* `muzero evaluate --run RUN --video DIR`: every greedy episode, into DIR/episode-<i>.mp4;
* `muzero evaluate --run RUN --opponent NAME --video DIR` (`muzero.arena.save_match_videos`):
  every game of a board-game match, into DIR/game-<i>-<side>-<outcome>.gif (GIF first: a
  board of four colours is exact and small as a GIF).
"""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from absl import logging

if TYPE_CHECKING:
    from muzero.config import GameConfig
    from muzero.envs.base import Environment

# Frames smaller than this (pixels high) are upscaled by the smallest integer factor that reaches it.
MIN_HEIGHT = 160
# Frames kept per episode: a long Atari game (27,000 moves of 210x160x3) would hold 2.7 GB;
# the first 10,000 moves (11 minutes at 15 frames per second) are what a video shows.
MAX_FRAMES = 10_000
VIDEO_DIR = "videos"
NO_ENCODER = "writing a video needs opencv-python-headless (mp4) or pillow (gif); pip install -e '.[video]'"


class VideoUnavailable(RuntimeError):
    """A video cannot be made: the game cannot draw itself, or no encoder is installed; one line."""


def upscale_factor(height: int, min_height: int = MIN_HEIGHT) -> int:
    """The integer factor that makes `height` at least `min_height` (1: large enough already)."""
    return max(1, math.ceil(min_height / height))


def upscale(frame: np.ndarray, min_height: int = MIN_HEIGHT) -> np.ndarray:
    """[H, W, 3] -> [k * H, k * W, 3], each pixel a k x k square (k = `upscale_factor(H)`)."""
    k = upscale_factor(frame.shape[0], min_height)
    return frame if k == 1 else np.repeat(np.repeat(frame, k, axis=0), k, axis=1)


def as_rgb(frame: np.ndarray) -> np.ndarray:
    """A rendered frame as uint8 [H, W, 3] (floats in [0, 1] and grey frames are converted)."""
    frame = np.asarray(frame)
    if frame.dtype != np.uint8:
        frame = np.clip(np.rint(frame.astype(np.float64) * 255.0), 0, 255).astype(np.uint8)
    if frame.ndim == 2:
        frame = frame[..., None]
    if frame.shape[-1] == 1:
        frame = np.repeat(frame, 3, axis=-1)
    return frame[..., :3]


def video_suffix(gif_first: bool = False) -> str:
    """The file suffix `write_video` can write here: ".mp4" with OpenCV, else ".gif" with
    Pillow (`gif_first`: ".gif" with Pillow, else ".mp4").

    Raises:
      VideoUnavailable: neither OpenCV nor Pillow is installed.
    """
    order = (("PIL", ".gif"), ("cv2", ".mp4")) if gif_first else (("cv2", ".mp4"), ("PIL", ".gif"))
    for module, suffix in order:
        if importlib.util.find_spec(module) is not None:
            return suffix
    raise VideoUnavailable(NO_ENCODER)


def write_video(frames: list[np.ndarray], path: Path, fps: float, min_height: int = MIN_HEIGHT) -> Path:
    """Writes `frames` (uint8 [H, W, 3], RGB) as an mp4 (or a GIF: `path` ending in .gif, or no OpenCV).

    Returns:
      The path written (`path`, or `path` with .gif when OpenCV is missing).

    Raises:
      VideoUnavailable: no frames, or neither OpenCV nor Pillow is installed.
    """
    if not frames:
        raise VideoUnavailable("no frames to write")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    images = [upscale(as_rgb(frame), min_height) for frame in frames]
    # Codecs work on 2x2 blocks of colour: an odd side gets one more row or column (the edge repeated).
    height, width = images[0].shape[:2]
    if height % 2 or width % 2:
        images = [np.pad(image, ((0, height % 2), (0, width % 2), (0, 0)), mode="edge") for image in images]
    if path.suffix.lower() != ".gif":
        try:
            import cv2
        except ImportError:
            path = path.with_suffix(".gif")
        else:
            return _write_mp4(images, path, fps, cv2)
    return _write_gif(images, path, fps)


def _write_mp4(images: list[np.ndarray], path: Path, fps: float, cv2) -> Path:
    height, width = images[0].shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), float(fps), (width, height))
    if not writer.isOpened():
        raise VideoUnavailable(f"{path}: OpenCV cannot write an mp4 here (no FFmpeg in this OpenCV build?)")
    try:
        for image in images:
            writer.write(np.ascontiguousarray(image[..., ::-1]))  # OpenCV takes BGR
    finally:
        writer.release()
    return path


def _write_gif(images: list[np.ndarray], path: Path, fps: float) -> Path:
    try:
        from PIL import Image
    except ImportError:
        raise VideoUnavailable(NO_ENCODER) from None
    first, *rest = [Image.fromarray(image) for image in images]
    first.save(path, save_all=True, append_images=rest, duration=max(1, round(1000 / fps)), loop=0)
    return path


def read_video(path: Path) -> np.ndarray:
    """The frames of a video written by `write_video`, uint8 [T, H, W, 3] RGB (tests and checks)."""
    path = Path(path)
    if path.suffix.lower() == ".gif":
        from PIL import Image, ImageSequence

        with Image.open(path) as image:
            return np.stack([np.asarray(frame.convert("RGB")) for frame in ImageSequence.Iterator(image)])
    import cv2

    capture = cv2.VideoCapture(str(path))
    frames = []
    try:
        while True:
            ok, frame = capture.read()
            if not ok:
                break
            frames.append(frame[..., ::-1])
    finally:
        capture.release()
    if not frames:
        raise VideoUnavailable(f"{path}: no frames could be read")
    return np.stack(frames)


class RecordingEnvironment:
    """An `Environment` that keeps the game's rendered frame after every reset and step.

    Each reset starts a new episode in `episodes`; an episode keeps at most `max_frames`
    frames. The game itself is untouched: when it cannot draw itself, `error` says why
    and recording stops, and playing goes on. Not for checkpointing (the wrapped
    environment renders, and a pygame screen does not pickle): wrap an environment made
    for the recording.

    Attributes:
      episodes: per episode, its frames uint8 [H, W, 3] (len(game) + 1 for a game of that many moves).
      error: why the game could not be recorded, or None.
    """

    def __init__(self, environment: Environment, max_frames: int = MAX_FRAMES):
        self.environment = environment
        self.max_frames = max_frames
        self.episodes: list[list[np.ndarray]] = []
        self.error: str | None = None
        self.observation_shape = environment.observation_shape
        self.observation_dtype = environment.observation_dtype
        self.action_space_size = environment.action_space_size
        self.num_players = environment.num_players
        self.symmetries = getattr(environment, "symmetries", ())  # `search.random_symmetry` reads them

    @property
    def fps(self) -> float:
        return float(getattr(self.environment, "video_fps", 30.0))

    def _capture(self) -> None:
        if self.error is not None or len(self.episodes[-1]) >= self.max_frames:
            return
        render = getattr(self.environment, "render", None)
        if render is None:
            self.error = f"{type(self.environment).__name__} has no render()"
            return
        # pygame (CartPole) draws off screen; without this, SDL looks for a display and complains.
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        try:
            frame = render()
            if isinstance(frame, str):  # board games draw their board as text (muzero play shows it)
                self.error = "it draws itself as text, not as images"
                return
            self.episodes[-1].append(as_rgb(frame))
        except Exception as error:  # noqa: BLE001 - whatever drawing raises, the game plays on
            self.error = str(error) or type(error).__name__

    def reset(self) -> np.ndarray:
        observation = self.environment.reset()
        self.episodes.append([])
        self._capture()
        return observation

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool]:
        result = self.environment.step(action)
        self._capture()
        return result

    def legal_actions(self) -> list[int]:
        return self.environment.legal_actions()

    def to_play(self) -> int:
        return self.environment.to_play()

    def close(self) -> None:
        self.environment.close()


def save_episodes(recorders: list[RecordingEnvironment], directory: Path) -> list[Path]:
    """Every episode the recorders hold, in order, as DIRECTORY/episode-<i>.mp4 (i from 0).

    Raises:
      VideoUnavailable: a game that cannot draw itself, or no encoder.
    """
    paths = []
    for recorder in recorders:
        if recorder.error is not None:
            raise VideoUnavailable(f"the game cannot be recorded: {recorder.error}")
        for frames in recorder.episodes:
            paths.append(write_video(frames, Path(directory) / f"episode-{len(paths)}.mp4", recorder.fps))
    return paths


class EvaluationVideos:
    """Training's videos: each evaluation plays one more greedy episode, recorded into
    RUN_DIR/videos/step-<N>.mp4.

    The recorded episode is played in a fresh environment seeded from the training step,
    beside the scored episodes (one more row of the batched search), so recording changes
    neither the evaluation's returns nor anything checkpointed. A game that cannot be
    recorded is warned about once, and not tried again in this process.

    Args:
      game: the `game` config section.
      run_dir: the run's folder.
      seed: the run's seed.
    """

    def __init__(self, game: GameConfig, run_dir: Path, seed: int):
        self.game = game
        self.directory = Path(run_dir) / VIDEO_DIR
        self.seed = seed
        self.enabled = True
        self.recorder: RecordingEnvironment | None = None

    def environments(self, step: int) -> list[RecordingEnvironment]:
        """The environment to play the recorded episode in ([] once recording has failed)."""
        if not self.enabled:
            return []
        from muzero.envs import make_environment

        self.recorder = RecordingEnvironment(make_environment(self.game, (self.seed + 2) * 10_007 + step))
        return [self.recorder]

    def save(self, step: int) -> Path | None:
        """Writes the episode just recorded; None (and a warning, the first time) when it cannot be."""
        recorder, self.recorder = self.recorder, None
        if recorder is None:
            return None
        try:
            if recorder.error is not None:
                raise VideoUnavailable(f"{self.game.id} cannot be recorded: {recorder.error}")
            path = write_video(recorder.episodes[0], self.directory / f"step-{step}.mp4", recorder.fps)
        except Exception as error:  # noqa: BLE001 - no video (nor an encoder error) may stop a run
            self.enabled = False
            logging.warning("no videos of the evaluations in this run (run.record_video): %s", error)
            return None
        finally:
            recorder.close()
        logging.info("video of a greedy episode (%d moves): %s", len(recorder.episodes[0]) - 1, path)
        return path
