"""The config's checks that span more than one field (one field's type and range are checked
as it is converted, in `muzero.config_io`)."""

from __future__ import annotations

import math
from collections.abc import Callable

from muzero.config import MuZeroConfig, parse_opponent


def check_consistency(config: MuZeroConfig, fail: Callable[[str, str], Exception]) -> None:
    """Checks that span more than one field.

    Args:
        config: the converted config, each field already of its type and in its range.
        fail: builds the error to raise from a key path and a message (`muzero.config_io`
            makes a one-line `ConfigError` naming the file the key came from).
    """
    path = "search.visit_softmax_temperature.schedule"
    schedule = config.search.visit_softmax_temperature.schedule
    if not schedule:
        raise fail(path, "expected at least one [threshold, temperature] pair")
    previous = -math.inf
    for i, (threshold, temperature) in enumerate(schedule):
        if temperature < 0:
            raise fail(f"{path}[{i}]", f"expected a temperature >= 0, got {temperature!r}")
        if threshold is None:
            if i != len(schedule) - 1:
                raise fail(f"{path}[{i}]", "a null threshold must be the last entry")
        elif threshold <= previous:
            raise fail(f"{path}[{i}]", f"thresholds must increase, got {threshold!r} after {previous!r}")
        else:
            previous = threshold
    bounds = config.search.known_bounds
    if bounds is not None and not bounds.min < bounds.max:
        raise fail("search.known_bounds", f"expected min < max, got min={bounds.min!r}, max={bounds.max!r}")
    for i, width in enumerate(config.network.hidden_layers):
        if width < 1:
            raise fail(f"network.hidden_layers[{i}]", f"expected a width >= 1, got {width!r}")
    if config.network.kind == "resnet" and not (config.selfplay.batched and config.selfplay.search == "compiled"):
        raise fail(
            "network.kind",
            "the resnet network runs only in the compiled batched search: "
            "set selfplay.batched: true and selfplay.search: compiled",
        )
    if config.selfplay.segment_length and not config.selfplay.batched:
        raise fail(
            "selfplay.segment_length", "segments are handed back by the batched self-play: set selfplay.batched: true"
        )
    if config.search.random_symmetry and not config.selfplay.batched:
        raise fail("search.random_symmetry", "images are searched by the batched self-play: set selfplay.batched: true")
    if config.network.projection_size and not config.train.consistency_loss_weight:
        raise fail(
            "network.projection_size", "the heads serve the consistency loss: set train.consistency_loss_weight > 0"
        )
    if config.game.stacked_frames > 1 and config.network.kind != "resnet":
        raise fail("game.stacked_frames", "stacked frames are images: they need network.kind: resnet")
    if config.replay.priority_alpha > 0 and config.replay.priority_epsilon == 0:
        raise fail(
            "replay.priority_epsilon",
            "expected a value > 0 with replay.priority_alpha > 0 (a position "
            "of priority 0 would never be drawn, and the importance weights are unbounded)",
        )

    if config.train.optimizer == "adam" and config.train.momentum >= 1:  # Adam divides by 1 - beta_1^t
        raise fail(
            "train.momentum",
            f"expected a value < 1 with train.optimizer: adam (its beta_1), got {config.train.momentum!r}",
        )
    if config.replay.min_games > config.replay.window_size:
        raise fail(
            "replay.min_games",
            f"expected at most replay.window_size ({config.replay.window_size}), got {config.replay.min_games}",
        )
    for i, opponent in enumerate(config.run.eval_opponents):
        try:
            parse_opponent(opponent)
        except ValueError as error:
            raise fail(f"run.eval_opponents[{i}]", str(error)) from None
    if config.actors.num_actors and config.actors.min_live_actors > config.actors.num_actors:
        raise fail(
            "actors.min_live_actors",
            f"expected at most actors.num_actors ({config.actors.num_actors}), got {config.actors.min_live_actors}",
        )
