"""The paper's Atari networks: residual towers over a 6x6 hidden state.

* representation: the stacked image [96, 96, 32 * 3 + 32] (frames / 255, action planes
  / A) -> the downsampling stack (conv stride 2 with P/2 planes, 2 residual blocks,
  conv stride 2 with P planes, 3 residual blocks, average pool stride 2, 3 residual
  blocks, average pool stride 2: 96x96 -> 6x6) -> `blocks` residual blocks -> "state"
  [6, 6, P], min-max scaled to [0, 1] per sample. With `network.downsample: false`
  (MinAtar's 10x10 frames) the stack is one 3x3 convolution to P planes instead, and
  the hidden state keeps the frame's size: [10, 10, P]. Board games (flat observations
  holding [planes, rows, cols], then the player to move) are seen as the board: [rows,
  cols, planes + 1], the player as a constant plane, as the paper's board-game input;
  with `downsample: false` the hidden state is the board's size.
* dynamics: [state, one-hot action tiled into A planes of 6x6] -> conv (P planes) ->
  `blocks` residual blocks -> "state" [6, 6, P] (min-max scaled) and a "reward" head. With
  `network.action_planes: board` the action is one plane of the board instead, a one where it
  acts (its cell, or its column: `board_action_planes`), as the paper's Go and chess encode moves.
* prediction: state -> "value" and "policy" heads, AlphaZero's: a 1x1 convolution (1
  plane for value and reward, 2 for the policy), then the `network.hidden_layers`
  fully connected layers and the output layer (601 bins for value and reward).

With `network.value_prefix` (EfficientZero), the reward head's flattened 1x1 convolution
feeds an LSTM cell ("lstm", u units, `keras.lstm_cell`) whose output goes through the
head's fully connected layers to the value prefix; the dynamics takes and returns the LSTM
state [2u] ("lstm_state"). The searches then carry [B, rows, cols, P + m] hidden states: the
latent planes, then h, c, the prefix and the step count packed into m planes
(`keras.ValuePrefixState`; MinAtar's 10x10 with the default u = 32: m = 1).

Residual blocks are AlphaZero's (conv 3x3, batch norm, ReLU, conv 3x3, batch norm,
skip connection, ReLU), which the paper reuses with 16 blocks of 256 planes. Batch
norm runs in training mode in `update_weights` and with its moving averages in the
search; the min-max scaling of the hidden state is applied on top, as the paper does.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from muzero.config import NetworkConfig
from muzero.networks.base import MIN_MAX_EPSILON, NetworkOutput, PublishedWeights, image_shape
from muzero.networks.keras import KerasNetwork, lstm_cell
from muzero.support import num_bins


def scale_hidden_state_planes(state: tf.Tensor) -> tf.Tensor:
    """Min-max scaling of each sample over all its planes to [0, 1]; [B, H, W, P] -> same, float32."""
    state = tf.cast(state, tf.float32)
    low = tf.reduce_min(state, axis=[1, 2, 3], keepdims=True)
    high = tf.reduce_max(state, axis=[1, 2, 3], keepdims=True)
    return (state - low) / tf.maximum(high - low, MIN_MAX_EPSILON)


class _Builder:
    """Layers with unique names, in the run's dtype policy (float32 or mixed_bfloat16)."""

    def __init__(self, dtype: str, init_zero: bool = False):
        self.dtype = dtype
        self.init_zero = init_zero  # `network.init_zero`: the heads' output layers start at zero

    def conv(self, x, planes: int, name: str, kernel: int = 3, strides: int = 1):
        return keras.layers.Conv2D(
            planes, kernel, strides=strides, padding="same", use_bias=False, name=name, dtype=self.dtype
        )(x)

    def conv_bn_relu(self, x, planes: int, name: str, kernel: int = 3, strides: int = 1):
        x = self.conv(x, planes, f"{name}_conv", kernel, strides)
        x = keras.layers.BatchNormalization(name=f"{name}_bn", dtype=self.dtype)(x)
        return keras.layers.ReLU(name=f"{name}_relu", dtype=self.dtype)(x)

    def residual_block(self, x, planes: int, name: str):
        y = self.conv_bn_relu(x, planes, f"{name}_a")
        y = self.conv(y, planes, f"{name}_b_conv")
        y = keras.layers.BatchNormalization(name=f"{name}_b_bn", dtype=self.dtype)(y)
        y = keras.layers.Add(name=f"{name}_add", dtype=self.dtype)([x, y])
        return keras.layers.ReLU(name=f"{name}_relu", dtype=self.dtype)(y)

    def tower(self, x, planes: int, count: int, name: str):
        for i in range(count):
            x = self.residual_block(x, planes, f"{name}_{i}")
        return x

    def head(self, x, planes: int, hidden_layers, outputs: int, name: str, lstm: tuple | None = None):
        """1x1 convolution, flatten, [an LSTM cell: `lstm` = (state input [B, 2u], u)], the fully
        connected layers, the output. Returns the output, and the new LSTM state with `lstm`."""
        x = self.conv_bn_relu(x, planes, f"{name}_head", kernel=1)
        x = keras.layers.Flatten(name=f"{name}_flatten", dtype=self.dtype)(x)
        lstm_state = None
        if lstm is not None:
            x, lstm_state = lstm_cell(x, *lstm)
        for i, width in enumerate(hidden_layers):
            x = keras.layers.Dense(width, activation="relu", name=f"{name}_hidden_{i}", dtype=self.dtype)(x)
        # Logits in float32 whatever the compute dtype: the losses need the precision.
        kernel = "zeros" if self.init_zero else "glorot_uniform"
        logits = keras.layers.Dense(outputs, name=name, dtype="float32", kernel_initializer=kernel)(x)
        return logits if lstm is None else (logits, lstm_state)


def downsample(build: _Builder, image, planes: int):
    """The paper's downsampling stack: [B, 96, 96, C] -> [B, 6, 6, planes] (any H, W: / 16)."""
    x = build.conv_bn_relu(image, planes // 2, "down_1", strides=2)
    x = build.tower(x, planes // 2, 2, "down_res_1")
    x = build.conv_bn_relu(x, planes, "down_2", strides=2)
    x = build.tower(x, planes, 3, "down_res_2")
    x = keras.layers.AveragePooling2D(3, strides=2, padding="same", name="down_pool_1", dtype=build.dtype)(x)
    x = build.tower(x, planes, 3, "down_res_3")
    return keras.layers.AveragePooling2D(3, strides=2, padding="same", name="down_pool_2", dtype=build.dtype)(x)


def board_action_planes(board_actions: str, rows: int, cols: int) -> np.ndarray:
    """`network.action_planes: board`: where each action acts, [A, rows, cols] of 0 and 1 (float32).

    "cells": action a is the cell (a // cols, a % cols), a one there (the paper's Go: a plane
    with a one at the stone); "columns": action a is column a, ones down the whole column
    (connect four: where the stone lands depends on the column's height, which the state holds).
    """
    if board_actions == "cells":
        return np.eye(rows * cols, dtype=np.float32).reshape(rows * cols, rows, cols)
    if board_actions != "columns":
        raise ValueError(f"board actions are 'cells' or 'columns', not {board_actions!r}")
    planes = np.zeros((cols, rows, cols), np.float32)
    for column in range(cols):
        planes[column, :, column] = 1.0
    return planes


def board_image(observation: tf.Tensor, board_shape: tuple[int, int, int]) -> tf.Tensor:
    """A flat board observation as an image: [B, planes * rows * cols + E] -> [B, rows, cols,
    planes + E], each of the E elements after the board (the player to move) as a constant plane."""
    planes, rows, cols = board_shape
    size = planes * rows * cols
    board = tf.transpose(tf.reshape(observation[:, :size], [-1, planes, rows, cols]), [0, 2, 3, 1])
    extra = observation[:, size:]
    constant = tf.tile(extra[:, None, None, :], [1, rows, cols, 1])
    return tf.concat([board, constant], axis=-1)


class ResNetwork(KerasNetwork):
    """The three functions as Keras models, with the pseudocode's inference interface.

    Args:
      net: the `network` config section (planes, blocks, hidden_layers, support_size).
      action_space_size: A.
      observation_shape: one environment observation, [H, W, C] (Atari: [96, 96, 3]).
      observation_dtype: uint8 frames are divided by 255.
      stacked_frames: `game.stacked_frames` (the image holds that many frames and action planes).
      mixed_precision: `train.mixed_precision`: bfloat16 compute, float32 weights and logits.
      board_shape: (planes, rows, cols) when observations are flat boards (`board_image`).
      action_planes: [A, rows, cols], where each action acts on the board (`board_action_planes`):
        the dynamics sees the action as that one plane; None: as A tiled one-hot planes.
    """

    def __init__(
        self,
        net: NetworkConfig,
        action_space_size: int,
        observation_shape: tuple[int, ...],
        observation_dtype=np.uint8,
        stacked_frames: int = 1,
        mixed_precision: bool = False,
        board_shape: tuple[int, int, int] | None = None,
        action_planes: np.ndarray | None = None,
    ):
        self.action_space_size = a = action_space_size
        if action_planes is not None and len(action_planes) != a:
            raise ValueError(f"{len(action_planes)} board action planes for {a} actions")
        self.action_planes = None if action_planes is None else tf.constant(action_planes, tf.float32)
        self.support_size = net.support_size
        self.value_transform = net.value_transform
        self.stacked_frames = stacked_frames
        self.board_shape = board_shape
        observation_image = image_shape(stacked_frames, observation_shape)
        self.observation_spec = tf.TensorSpec([None, *observation_image], tf.as_dtype(observation_dtype))
        if board_shape is not None:
            planes, rows, cols = board_shape
            extra = int(np.prod(observation_shape)) - planes * rows * cols
            self.image_shape = (rows, cols, planes + extra)
        else:
            self.image_shape = observation_image
        bins = num_bins(net.support_size)
        planes = net.planes
        build = _Builder("mixed_bfloat16" if mixed_precision else "float32", net.init_zero)

        image = keras.Input(self.image_shape, name="image")
        x = downsample(build, image, planes) if net.downsample else build.conv_bn_relu(image, planes, "stem")
        x = build.tower(x, planes, net.blocks, "res")
        self.representation = keras.Model(image, {"state": x}, name="representation")
        self.latent_shape = self.hidden_shape = tuple(int(d) for d in x.shape[1:])

        action_depth = a if action_planes is None else 1
        state_and_action = keras.Input((*self.latent_shape[:2], planes + action_depth), name="state_and_action")
        x = build.conv_bn_relu(state_and_action, planes, "dynamics_in")
        x = build.tower(x, planes, net.blocks, "res")
        if net.value_prefix:
            lstm_input = keras.Input((2 * net.lstm_hidden_size,), name="lstm_state")
            lstm = (lstm_input, net.lstm_hidden_size)
            reward, lstm_state = build.head(x, 1, net.hidden_layers, bins, "reward", lstm)
            outputs = {"state": x, "reward": reward, "lstm_state": lstm_state}
            self.dynamics = keras.Model([state_and_action, lstm_input], outputs, name="dynamics")
            self._enable_value_prefix(net.lstm_hidden_size, net.value_prefix_horizon)
        else:
            reward = build.head(x, 1, net.hidden_layers, bins, "reward")
            self.dynamics = keras.Model(state_and_action, {"state": x, "reward": reward}, name="dynamics")

        state = keras.Input(self.latent_shape, name="state")
        value = build.head(state, 1, net.hidden_layers, bins, "value")
        policy = build.head(state, 2, net.hidden_layers, a, "policy")
        self.prediction = keras.Model(state, {"policy": policy, "value": value}, name="prediction")
        self.steps = 0
        if net.projection_size:
            self._enable_projection(net.projection_size)

    def scale_image(self, observation) -> tf.Tensor:
        """Frames / 255 when they are uint8, action planes / A; float32 [B, H, W, C] -> same.
        Flat boards become images first (`board_image`)."""
        x = tf.cast(tf.convert_to_tensor(observation), tf.float32)
        if self.board_shape is not None:
            return board_image(x, self.board_shape)
        n = self.stacked_frames
        frames, actions = (x[..., :-n], x[..., -n:]) if n > 1 else (x, None)
        if self.observation_spec.dtype == tf.uint8:
            frames = frames / 255.0
        return frames if actions is None else tf.concat([frames, actions / float(self.action_space_size)], axis=-1)

    def represent(self, observation, training: bool = False) -> tf.Tensor:
        """The representation function alone: [B, H, W, C] images -> scaled latent planes [B, h, w, planes]."""
        return scale_hidden_state_planes(self.representation(self.scale_image(observation), training=training)["state"])

    def initial_inference(self, observation, training: bool = False) -> NetworkOutput:
        """images [B, H, W, C] -> NetworkOutput; hidden state [B, h, w, P] ([B, h, w, P + m] with value prefix)."""
        state = self.represent(observation, training)
        # The initial step has no incoming transition: its reward is 0 and carries no gradient.
        return self._predict(state, tf.zeros(tf.shape(state)[:1]), None, training, self._initial_state(state))

    def recurrent_inference(self, hidden_state, action, training: bool = False) -> NetworkOutput:
        """hidden_state [B, *hidden_shape], action [B] -> NetworkOutput (value prefix: see `keras.py`)."""
        inputs = self._dynamics_inputs(hidden_state)
        latent, lstm_state = inputs[:2]
        x = tf.concat([latent, self.action_image(action)], axis=-1)
        out = self.dynamics(x if lstm_state is None else [x, lstm_state], training=training)
        return self._recurrent_output(out, inputs, scale_hidden_state_planes(out["state"]), training)

    def action_image(self, action) -> tf.Tensor:
        """action [B] -> the planes the dynamics sees beside the state: [B, h, w, A], the one-hot
        tiled over the grid (the paper's Atari), or [B, rows, cols, 1], where it acts on the board."""
        action = tf.cast(action, tf.int32)
        if self.action_planes is not None:
            return tf.gather(self.action_planes, action)[..., None]
        height, width = self.latent_shape[:2]
        return tf.tile(tf.one_hot(action, self.action_space_size)[:, None, None, :], [1, height, width, 1])

    def get_weights(self) -> dict:
        """Weights as plain numpy data: {function: [arrays in Keras order]} (batch-norm averages included)."""
        return {name: [np.array(w) for w in model.get_weights()] for name, model in self.models.items()}

    def set_weights(self, weights: dict) -> None:
        for name, model in self.models.items():
            model.set_weights(weights[name])

    def published_network(self, steps: int | None = None) -> PublishedWeights:
        """The network as published to self-play: its weights (`PublishedWeights`, run by the compiled search)."""
        return PublishedWeights(self.get_weights(), self.action_space_size, self.steps if steps is None else steps)
