"""Tests for muzero/resnet.py: the paper's Atari networks."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from muzero.config import GameConfig, MuZeroConfig, NetworkConfig, SelfPlayConfig, TrainConfig
from muzero.config_loader import load_config
from muzero.envs import EnvironmentSpec, check_environment
from muzero.envs.atari import AtariSettings
from muzero.factories import make_run_network
from muzero.networks.resnet import ResNetwork, board_action_planes, board_image
from tests.helpers import CONNECT4

# Atari frames as the ALE plug-in gives them: [96, 96, 3] uint8, 18 actions, one player.
ATARI_SPEC = EnvironmentSpec((96, 96, 3), np.uint8, 18, 1)


def _config(planes: int, blocks: int, hidden_layers=(16,), mixed_precision: bool = False) -> MuZeroConfig:
    return MuZeroConfig(
        game=GameConfig(id="ALE/Pong-v5", action_space_size=18, stacked_frames=32, kwargs=AtariSettings()),
        network=NetworkConfig(
            kind="resnet", planes=planes, blocks=blocks, hidden_layers=hidden_layers, support_size=300
        ),
        selfplay=SelfPlayConfig(batched=True, search="compiled"),
        train=TrainConfig(mixed_precision=mixed_precision),
    )


def _images(batch: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    frames = rng.integers(256, size=(batch, 96, 96, 96), dtype=np.uint8)
    actions = np.broadcast_to(rng.integers(18, size=(batch, 1, 1, 32)), (batch, 96, 96, 32)).astype(np.uint8)
    return np.concatenate([frames, actions], axis=-1)


def _check_outputs(network: ResNetwork, planes: int, batch: int) -> None:
    output = network.initial_inference(_images(batch))
    # 96x96 -> 48 (conv stride 2) -> 24 (conv stride 2) -> 12 (pool) -> 6 (pool).
    assert output.hidden_state.shape == (batch, 6, 6, planes)
    assert output.value_logits.shape == (batch, 601) and output.policy_logits.shape == (batch, 18)
    assert output.value.shape == (batch,) and output.reward.shape == (batch,)
    recurrent = network.recurrent_inference(output.hidden_state, np.arange(batch) % 18)
    assert recurrent.hidden_state.shape == (batch, 6, 6, planes)
    assert recurrent.reward_logits.shape == (batch, 601) and recurrent.value_logits.shape == (batch, 601)
    for state in (output.hidden_state, recurrent.hidden_state):
        # Min-max scaled per sample over all its planes: exactly 0 and 1 at the extremes.
        flat = tf.reshape(tf.cast(state, tf.float32), (batch, -1)).numpy()
        np.testing.assert_allclose(flat.min(1), 0.0, atol=1e-6)
        np.testing.assert_allclose(flat.max(1), 1.0, atol=1e-6)


def test_tiny_shapes():
    network = make_run_network(_config(planes=8, blocks=1), ATARI_SPEC)
    assert isinstance(network, ResNetwork)
    assert network.observation_spec.shape.as_list() == [None, 96, 96, 128]
    assert network.observation_spec.dtype == tf.uint8
    _check_outputs(network, planes=8, batch=3)


@pytest.mark.slow
def test_paper_size_shapes_and_parameter_count():
    network = make_run_network(_config(planes=256, blocks=16, hidden_layers=(256,)), ATARI_SPEC)
    _check_outputs(network, planes=256, batch=1)
    convs = {
        name: sum(int(np.prod(v.shape)) for v in model.trainable_variables if "conv" in v.path)
        for name, model in network.models.items()
    }
    # A residual block has two 3x3 convolutions of 256 -> 256 planes: 2 * 9 * 256 * 256 = 1,179,648.
    block = 2 * 9 * 256 * 256
    # Dynamics: the input conv over 256 + 18 planes, 16 blocks, the reward head's 1x1 conv to 1 plane.
    assert convs["dynamics"] == 9 * (256 + 18) * 256 + 16 * block + 256
    # Representation: conv 128 -> 128 planes (stride 2), 2 blocks of 128, conv 128 -> 256 (stride 2),
    # 3 + 3 blocks of 256, then the 16 blocks.
    assert convs["representation"] == (9 * 128 * 128 + 2 * 2 * 9 * 128 * 128 + 9 * 128 * 256 + (3 + 3 + 16) * block)


def test_image_scaling_divides_frames_by_255_and_actions_by_the_action_count():
    network = make_run_network(_config(planes=8, blocks=0), ATARI_SPEC)
    image = np.zeros((1, 96, 96, 128), np.uint8)
    image[..., 5] = 51  # a frame channel: 51 / 255 = 0.2
    image[..., 127] = 9  # the newest action plane, action 9: 9 / 18 = 0.5
    scaled = network.scale_image(image).numpy()
    assert scaled[0, 0, 0, 5] == pytest.approx(0.2) and scaled[0, 0, 0, 127] == pytest.approx(0.5)
    assert scaled[..., 6:127].max() == 0.0


def test_dynamics_sees_the_action():
    network = make_run_network(_config(planes=8, blocks=1), ATARI_SPEC)
    state = network.initial_inference(_images(1)).hidden_state
    a = network.recurrent_inference(state, np.array([0])).hidden_state.numpy()
    b = network.recurrent_inference(state, np.array([7])).hidden_state.numpy()
    assert not np.allclose(a, b)


def test_mixed_precision_computes_in_bfloat16_and_returns_float32():
    network = make_run_network(_config(planes=8, blocks=1, mixed_precision=True), ATARI_SPEC)
    conv = network.dynamics.get_layer("res_0_a_conv")
    assert conv.compute_dtype == "bfloat16" and conv.variable_dtype == "float32"
    output = network.initial_inference(_images(2))
    assert output.value_logits.dtype == tf.float32 and output.hidden_state.dtype == tf.float32
    assert np.isfinite(output.value.numpy()).all()


def test_a_skipped_update_leaves_batch_norm_averages_unchanged():
    from muzero.replay import Batch
    from muzero.training import Learner

    config = _config(planes=8, blocks=1)
    config = config.replace(train=TrainConfig(batch_size=2, num_unroll_steps=2))
    network = make_run_network(config, ATARI_SPEC)
    learner = Learner(config.train, network)
    rng = np.random.default_rng(0)

    def batch(policy: float) -> Batch:
        return Batch(
            observation=_images(2),
            actions=rng.integers(18, size=(2, 2)).astype(np.int32),
            target_value=np.ones((2, 3), np.float32),
            target_reward=np.zeros((2, 3), np.float32),
            target_policy=np.full((2, 3, 18), policy, np.float32),
            policy_mask=np.ones((2, 3), np.float32),
        )

    def averages():
        return [v.numpy().copy() for v in network.non_trainable_variables]

    assert network.non_trainable_variables  # moving means and variances of the batch norms
    before = averages()
    assert learner.train_step(batch(1 / 18))["train/finite"] == 1.0
    moved = averages()
    # A training-mode forward pass moves the averages (momentum 0.99 toward the batch statistics).
    assert any(not np.array_equal(a, b) for a, b in zip(before, moved))
    # A NaN policy target makes the loss NaN: the update is skipped and the averages are put back.
    assert learner.train_step(batch(np.nan))["train/finite"] == 0.0
    for a, b in zip(moved, averages()):
        np.testing.assert_array_equal(a, b)


def test_a_flat_board_becomes_planes_with_the_player_as_a_constant_plane():
    # A 2-plane, 2x3 board flattened plane by plane, then the player to move (1):
    # plane 0 = [[1, 0, 0], [0, 0, 1]], plane 1 = [[0, 1, 0], [0, 0, 0]].
    flat = np.array([[1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1]], np.float32)
    image = board_image(tf.constant(flat), (2, 2, 3)).numpy()
    assert image.shape == (1, 2, 3, 3)  # [B, rows, cols, planes + 1]
    np.testing.assert_array_equal(image[0, :, :, 0], [[1, 0, 0], [0, 0, 1]])
    np.testing.assert_array_equal(image[0, :, :, 1], [[0, 1, 0], [0, 0, 0]])
    np.testing.assert_array_equal(image[0, :, :, 2], np.ones((2, 3)))  # the player, on every cell


def test_a_board_game_resnet_sees_the_board_and_keeps_its_size():
    config = load_config(
        CONNECT4, ["network.kind=resnet", "network.downsample=false", "network.planes=8", "network.hidden_layers=[16]"]
    )
    # Connect four's observation: 3 planes of 6x7 (tests/test_openspiel.py), then the player: 127.
    network = make_run_network(config, check_environment(config.game, network=config.network))
    assert network.image_shape == (6, 7, 4) and network.observation_spec.shape.as_list() == [None, 127]
    output = network.initial_inference(np.zeros((2, 127), np.float32))
    # No downsampling: the hidden state is the board's 6x7; values on the 3 bins of support_size 1.
    assert output.hidden_state.shape == (2, 6, 7, 8) and output.value_logits.shape == (2, 3)
    assert network.recurrent_inference(output.hidden_state, np.array([0, 6])).policy_logits.shape == (2, 7)


def test_board_action_planes_by_hand():
    # Columns of a 2x3 board: action 1 is the middle column, a one on both rows of it.
    columns = board_action_planes("columns", 2, 3)
    assert columns.shape == (3, 2, 3)
    np.testing.assert_array_equal(columns[1], [[0, 1, 0], [0, 1, 0]])
    # Cells of a 2x2 board, row by row: action 3 is the bottom-right cell, action 1 the top-right.
    cells = board_action_planes("cells", 2, 2)
    np.testing.assert_array_equal(cells[3], [[0, 0], [0, 1]])
    np.testing.assert_array_equal(cells[1], [[0, 1], [0, 0]])
    with pytest.raises(ValueError, match="not None"):  # a spec without the board's actions
        board_action_planes(None, 2, 2)


def test_board_action_planes_reach_the_dynamics_as_one_plane():
    settings = ["network.planes=8", "network.hidden_layers=[16]", "network.action_planes=board"]
    config = load_config(CONNECT4, settings)
    network = make_run_network(config, check_environment(config.game, network=config.network))
    # One plane beside the 8 of the state, where the tiled encoding had 7 (one per column).
    assert tuple(network.dynamics.inputs[0].shape) == (None, 6, 7, 9)
    image = network.action_image(np.array([6, 0])).numpy()
    assert image.shape == (2, 6, 7, 1)
    np.testing.assert_array_equal(image[0, :, :, 0], board_action_planes("columns", 6, 7)[6])
    assert image[0, :, 6, 0].tolist() == [1.0] * 6 and image[0, :, :6].sum() == 0  # column 6, every row
    state = network.initial_inference(np.zeros((1, 127), np.float32)).hidden_state
    a = network.recurrent_inference(state, np.array([0])).hidden_state.numpy()
    b = network.recurrent_inference(state, np.array([6])).hidden_state.numpy()
    assert a.shape == (1, 6, 7, 8) and not np.allclose(a, b)


def test_a_mirrored_board_observation_is_the_mirrored_image():
    # Replay's symmetries permute the flat observation (muzero/symmetries.py); the resnet must
    # see that as the board flipped left to right, the player plane unchanged.
    from muzero.envs.openspiel import OpenSpielEnvironment

    environment = OpenSpielEnvironment("connect_four")
    environment.reset()
    for column in (0, 0, 1, 5):  # an asymmetric position
        environment.step(column)
    flat = environment.observation()
    _, mirror = environment.symmetries  # the identity first
    image = board_image(tf.constant(flat[None]), (3, 6, 7)).numpy()[0]
    mirrored = board_image(tf.constant(flat[None, list(mirror.observation)]), (3, 6, 7)).numpy()[0]
    np.testing.assert_array_equal(mirrored, image[:, ::-1, :])
    assert not np.array_equal(image, image[:, ::-1, :])


def test_init_zero_heads_start_at_value_0_reward_0_and_a_uniform_prior():
    # network.init_zero on the resnet: every value, reward and policy logit is 0 before training, so
    # the value and reward (the mean over -300..300 of a uniform support, h^-1(0)) are 0 and the prior
    # is 1/18 on each action; the hidden state is still min-max scaled into [0, 1] (_check_outputs).
    config = _config(planes=8, blocks=1)
    config = config.replace(network=dataclasses.replace(config.network, init_zero=True))
    network = make_run_network(config, ATARI_SPEC)
    _check_outputs(network, planes=8, batch=2)
    output = network.initial_inference(_images(2))
    recurrent = network.recurrent_inference(output.hidden_state, np.array([3, 17]))
    for out in (output, recurrent):
        assert not np.asarray(out.policy_logits).any() and not np.asarray(out.value_logits).any()
        np.testing.assert_allclose(out.value, 0.0, atol=1e-4)  # float32's rounding: 3e-5 here
    assert not np.asarray(recurrent.reward_logits).any()
    np.testing.assert_allclose(recurrent.reward, 0.0, atol=1e-4)
