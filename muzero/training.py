"""The learner: `scale_gradient`, `scalar_loss`, `update_weights`, `train_network`.

Documented choices (docs/choices.md lists them with the others where the pseudocode is silent):
* Batch mean, not sum: each sample's loss is the pseudocode's, then averaged over the
  batch, so the learning rate does not depend on the batch size.
* The initial step's reward loss is masked (the root has no incoming transition).
* Absorbing states past the end of a game keep their value and reward losses
  (targets 0, as in the pseudocode) and get no policy loss.
* Weight decay is `weight_decay * sum(tf.nn.l2_loss(w))` over all trainable weights,
  biases included, as `network.get_weights()` in the pseudocode.
* Prioritized replay: each sample's summed step loss is multiplied by its importance
  weight before the batch mean (weights 1 without priorities: the same numbers).
* Not MuZero, off by default: an EfficientZero-style consistency loss (`muzero/consistency.py`),
  and EfficientZero's value prefix (`network.value_prefix`, docs/value_prefix.md): the reward
  loss at step k is against the sum of rewards since the last LSTM reset (`value_prefix_targets`),
  the LSTM runs along the unroll inside the augmented hidden state, and the 0.5 gradient scale
  applies to the latent state only (EfficientZero's too), not to the LSTM state.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import keras
import numpy as np
import tensorflow as tf

from muzero.config import TrainConfig
from muzero.consistency import consistency_loss
from muzero.gradient_scaling import scale_gradient
from muzero.networks.keras import KerasNetwork
from muzero.replay import Batch, ReplayBuffer
from muzero.replay.targets import value_prefix_targets
from muzero.support import entropy_tf, num_bins, scalar_to_support

if TYPE_CHECKING:
    from muzero.replay.prefetch import BatchPrefetcher
    from muzero.storage import SharedStorage


def scalar_loss(prediction: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
    """Per-sample loss of a value or reward prediction.

    Args:
      prediction: [B, 2n + 1] logits over the support, or [B] scalars.
      target: [B, 2n + 1] two-hot distribution, or [B] scalars.

    Returns:
      [B]: cross-entropy for the categorical case, squared error for scalars (MSE).
    """
    if prediction.shape.rank == 2:
        return -tf.reduce_sum(target * tf.nn.log_softmax(prediction, axis=-1), axis=-1)
    return tf.square(prediction - target)


def learning_rate(train: TrainConfig, training_step: int) -> float:
    """lr_init * lr_decay_rate ^ (training_step / lr_decay_steps), continuous (the `train` section's)."""
    return train.lr_init * train.lr_decay_rate ** (training_step / train.lr_decay_steps)


def make_optimizer(train: TrainConfig) -> keras.optimizers.Optimizer:
    """SGD with momentum (or Adam) and the pseudocode's exponential decay (non-staircase), from the `train` section."""
    schedule = keras.optimizers.schedules.ExponentialDecay(
        train.lr_init, decay_steps=train.lr_decay_steps, decay_rate=train.lr_decay_rate, staircase=False
    )
    if train.optimizer == "adam":
        return keras.optimizers.Adam(learning_rate=schedule, beta_1=train.momentum)
    return keras.optimizers.SGD(learning_rate=schedule, momentum=train.momentum)


# Why: MuZero trains its model only through what it predicts along real
# trajectories: unroll K steps from a real observation, feeding the real actions
# to the dynamics function, and compare each step's value, reward and policy
# with the targets from make_target. The 1/K on each recurrent step keeps the
# K unrolled steps together about as heavy as the initial step; the 0.5 on the
# hidden state halves the gradient flowing back through each dynamics step, so
# that the gradient reaching the start does not grow with K.
def muzero_loss(
    network: KerasNetwork,
    batch: Batch,
    weight_decay: float,
    hidden_state_scale: float = 0.5,
    hidden_state_gradient: Callable[[tf.Tensor], tf.Tensor] | None = None,
    value_loss_weight: float = 1.0,
    consistency_loss_weight: float = 0.0,
) -> tuple[tf.Tensor, dict, list]:
    """The loss of `update_weights`, with per-part values for logging.

    Args:
      value_loss_weight: the value loss's weight in each step's loss (`train.value_loss_weight`;
        Reanalyse in the paper: 0.25).
      consistency_loss_weight: w > 0 adds w * `consistency_loss` to each recurrent step's
        loss (needs `batch.unroll_observation` and `unroll_mask`); 0: MuZero's loss.
      hidden_state_scale: the pseudocode's 0.5 on the hidden state after each dynamics step.
      hidden_state_gradient: replaces `scale_gradient(., hidden_state_scale)` by another
        op on that link (scripts/gradient_scaling_demo.py compares norm clipping).

    Returns:
      (total, metrics, hidden_states): total = batch mean of the summed step losses, each
      sample's times its importance weight when the batch has them, + weight decay;
      metrics: "total", "l2", "value", "reward", "policy", ("consistency",) "step_k", "policy_target_entropy",
      ("value_target_entropy",) (scalars; the parts unweighted) and "initial_value" ([B] value at k = 0, for priorities);
      hidden_states: the K + 1 states [B, *hidden_shape] predicted at each unroll step, before
      their gradient is scaled (for gradient-norm summaries).
    """
    observation, actions, target_value, target_reward, target_policy, policy_mask, importance_weight = batch[:7]
    num_unroll_steps = actions.shape[1]

    # Initial step, from the real observation.
    output = network.initial_inference(observation, training=True)
    predictions = [(1.0, output)]
    hidden_state = output.hidden_state
    hidden_states = [hidden_state]

    # Recurrent steps, from action and previous hidden state.
    for k in range(num_unroll_steps):
        output = network.recurrent_inference(hidden_state, actions[:, k], training=True)
        predictions.append((1.0 / num_unroll_steps, output))
        hidden_states.append(output.hidden_state)
        # With value prefix, the LSTM state, prefix and count pass unscaled (`map_latent`).
        if hidden_state_gradient is None:
            hidden_state = network.map_latent(output.hidden_state, lambda s: scale_gradient(s, hidden_state_scale))
        else:
            hidden_state = network.map_latent(output.hidden_state, hidden_state_gradient)

    consistency = None
    projected = network.projection is not None  # EfficientZero's heads (`network.projection_size`)
    if consistency_loss_weight > 0:
        # The representation of every real observation along the unroll, as one batch [B * K, ...].
        unrolled = batch.unroll_observation
        flat = tf.reshape(unrolled, tf.concat([[-1], tf.shape(unrolled)[2:]], axis=0))
        # Training mode, as the online pass (EfficientZero too): with batch norm (resnet), these
        # observations also move the representation's averages; the value and policy heads do not run.
        target = network.represent(flat, training=True)
        if projected:  # the target side is projected
            target = network.projection(target, training=True)
        consistency = tf.reshape(target, tf.concat([tf.shape(actions)[:2], tf.shape(target)[1:]], axis=0))

    loss = 0.0
    parts = {"value": 0.0, "reward": 0.0, "policy": 0.0, "policy_target_entropy": 0.0}  # entropy: the loss's floor
    if predictions[0][1].value_logits.shape.rank == 2:  # categorical value: the same floor under its loss
        parts["value_target_entropy"] = 0.0
    if consistency is not None:
        parts["consistency"] = 0.0
    step_losses = []
    for k, (gradient_scale, output) in enumerate(predictions):
        value_loss = scalar_loss(output.value_logits, target_value[:, k])
        # The initial step predicts no reward: no reward loss there.
        reward_loss = scalar_loss(output.reward_logits, target_reward[:, k]) if k > 0 else tf.zeros_like(value_loss)
        # No policy target on absorbing states past the end of the game.
        policy_loss = (
            tf.nn.softmax_cross_entropy_with_logits(logits=output.policy_logits, labels=target_policy[:, k])
            * policy_mask[:, k]
        )
        weighted_value_loss = value_loss if value_loss_weight == 1.0 else value_loss_weight * value_loss
        l = weighted_value_loss + reward_loss + policy_loss
        if consistency is not None and k > 0:
            predicted = network.latent(output.hidden_state)
            if projected:  # and the dynamics' side projected, then through the prediction head
                predicted = network.projection_head(network.projection(predicted, training=True), training=True)
            similarity_loss = consistency_loss(
                predicted, consistency[:, k - 1], batch.unroll_mask[:, k - 1], centred=not projected
            )
            l += consistency_loss_weight * similarity_loss
            parts["consistency"] += tf.reduce_mean(similarity_loss)
        loss += scale_gradient(l, gradient_scale)
        step_losses.append(tf.reduce_mean(l))
        parts["value"] += tf.reduce_mean(value_loss)
        parts["reward"] += tf.reduce_mean(reward_loss)
        parts["policy"] += tf.reduce_mean(policy_loss)
        parts["policy_target_entropy"] += tf.reduce_mean(entropy_tf(target_policy[:, k]) * policy_mask[:, k])
        if "value_target_entropy" in parts:
            parts["value_target_entropy"] += tf.reduce_mean(entropy_tf(target_value[:, k]))

    if importance_weight is not None:
        # Prioritized replay: undo the sampling bias, sample by sample.
        loss = loss * importance_weight
    loss = tf.reduce_mean(loss)
    l2 = weight_decay * tf.add_n([tf.nn.l2_loss(w) for w in network.trainable_variables])
    total = loss + l2
    metrics = {"total": total, "l2": l2, **parts}
    metrics.update({f"step_{k}": value for k, value in enumerate(step_losses)})
    metrics["initial_value"] = predictions[0][1].value
    return total, metrics, hidden_states


def update_weights(
    optimizer: keras.optimizers.Optimizer,
    network: KerasNetwork,
    batch: Batch,
    weight_decay: float,
    gradient_norms: bool = False,
    value_loss_weight: float = 1.0,
    consistency_loss_weight: float = 0.0,
) -> dict:
    """One optimizer step (SGD or Adam) on `muzero_loss`, skipped when the loss or a gradient is not finite.

    Args:
      value_loss_weight, consistency_loss_weight: see `muzero_loss`.
      gradient_norms: also return `grad/...` norms: of the loss gradient with respect to
        the hidden state of each unroll step, per function, and global.

    Returns:
      {"loss/<part>": scalar, ...}, "train/finite" (1.0 when the update was applied,
      0.0 when skipped: weights, batch-norm averages, momentum and step counter unchanged), the `grad/...`
      norms when asked, and "initial_value": [B] the value predicted at k = 0 (before
      the update), from which the host computes new replay priorities.
    """
    variables = network.trainable_variables
    # The forward pass in training mode moves batch-norm averages; a skipped update puts them back.
    averages = network.non_trainable_variables
    saved_averages = [tf.identity(v) for v in averages]
    with tf.GradientTape() as tape:
        total, metrics, hidden_states = muzero_loss(
            network,
            batch,
            weight_decay,
            value_loss_weight=value_loss_weight,
            consistency_loss_weight=consistency_loss_weight,
        )
    initial_value = metrics.pop("initial_value")
    if gradient_norms:
        gradients, state_gradients = tape.gradient(total, (variables, hidden_states))
    else:
        gradients = tape.gradient(total, variables)
    finite = tf.logical_and(tf.math.is_finite(total), tf.math.is_finite(tf.linalg.global_norm(gradients)))

    def apply() -> tf.Tensor:
        optimizer.apply_gradients(zip(gradients, variables))
        return tf.constant(1.0)

    out = {f"loss/{name}": value for name, value in metrics.items()}

    def skip() -> tf.Tensor:
        for average, saved in zip(averages, saved_averages):
            average.assign(saved)
        return tf.constant(0.0)

    out["train/finite"] = tf.cond(finite, apply, skip)
    if gradient_norms:
        out.update(gradient_norm_metrics(network, gradients, state_gradients))
    out["initial_value"] = initial_value
    return out


def gradient_norm_metrics(network: KerasNetwork, gradients: list, state_gradients: list) -> dict:
    """Norms that show gradient flow: per unroll step's hidden state, per function, global."""
    out = {f"grad/hidden_state_step_{k}": tf.norm(g) for k, g in enumerate(state_gradients)}
    start = 0
    for name, model in network.models.items():
        count = len(model.trainable_variables)
        out[f"grad/{name}_norm"] = tf.linalg.global_norm(gradients[start : start + count])
        start += count
    out["grad/global_norm"] = tf.linalg.global_norm(gradients)
    return out


class Learner:
    """Holds the network and optimizer; runs a compiled `update_weights` that never retraces.

    Args:
      train: the `train` section (optimizer, unroll length, loss weights, XLA).
      network: the Keras network to train; its `observation_spec` gives the input signature, its
        action count, support size and value transform the targets' shapes.
      td_steps: the bootstrap horizon of the value targets `train_on_replay` samples
        (`reanalyse.td_steps` while Reanalyse is on); None: `train.td_steps`.
      grad_summary_interval: `run.grad_summary_interval`: `grad/...` norms every this many steps (0: never).
    """

    def __init__(
        self, train: TrainConfig, network: KerasNetwork, td_steps: int | None = None, grad_summary_interval: int = 0
    ):
        self.train = train
        self.network = network
        self.td_steps = train.td_steps if td_steps is None else td_steps
        self.grad_summary_interval = grad_summary_interval
        self.optimizer = make_optimizer(train)
        self.optimizer.build(network.trainable_variables)
        self._training_step: int | None = None
        k = train.num_unroll_steps
        bins = num_bins(network.support_size)
        scalar_shape = [None, k + 1, bins] if network.support_size else [None, k + 1]
        observation_spec = network.observation_spec
        signature = Batch(
            observation=observation_spec,
            actions=tf.TensorSpec([None, k], tf.int32),
            target_value=tf.TensorSpec(scalar_shape, tf.float32),
            target_reward=tf.TensorSpec(scalar_shape, tf.float32),
            target_policy=tf.TensorSpec([None, k + 1, network.action_space_size], tf.float32),
            policy_mask=tf.TensorSpec([None, k + 1], tf.float32),
            importance_weight=tf.TensorSpec([None], tf.float32),
            unroll_observation=tf.TensorSpec([None, None, *observation_spec.shape[1:]], observation_spec.dtype),
            unroll_mask=tf.TensorSpec([None, None], tf.float32),
        )
        weights = {
            "value_loss_weight": train.value_loss_weight,
            "consistency_loss_weight": train.consistency_loss_weight,
        }
        weight_decay = train.weight_decay

        # Also the step counter after the update: a host read of the variable is an eager op.
        def step(batch: Batch, gradient_norms: bool = False) -> dict:
            out = update_weights(self.optimizer, self.network, batch, weight_decay, gradient_norms, **weights)
            return {**out, "train/iterations": tf.identity(self.optimizer.iterations)}

        jit = train.jit_compile
        self._step = tf.function(step, input_signature=[signature], jit_compile=jit)
        # Traced only when first used: no cost when gradient summaries are off.
        self._step_with_norms = tf.function(lambda b: step(b, True), input_signature=[signature], jit_compile=jit)

    @property
    def training_step(self) -> int:
        """The optimizer's step counter: the last `train_step`'s, or read after `forget_step`."""
        if self._training_step is None:
            self._training_step = int(self.optimizer.iterations.numpy())
        return self._training_step

    def forget_step(self) -> None:
        """The optimizer's variables were restored: `training_step` reads the counter again."""
        self._training_step = None

    def prepare(self, batch: Batch) -> Batch:
        """Turns scalar value/reward targets into two-hot supports when the network is categorical,
        fills importance weights of 1 when the batch has none (uniform sampling), and empty
        [B, 0, ...] unroll observations when the consistency loss is off. With value prefix, the
        reward targets become prefix sums first (`value_prefix_targets`)."""
        n = self.network.support_size
        size = len(batch.actions)
        if batch.importance_weight is None:
            batch = batch._replace(importance_weight=np.ones(size, np.float32))
        observation_spec = self.network.observation_spec
        shape = tuple(observation_spec.shape[1:].as_list())
        batch = batch._replace(observation=np.reshape(batch.observation, (size, *shape)))
        if batch.unroll_observation is None:
            if self.train.consistency_loss_weight > 0:
                raise ValueError(
                    "train.consistency_loss_weight > 0 needs batches with unroll_observation "
                    "(ReplayBuffer.sample_batch adds them under that config)"
                )
            batch = batch._replace(
                unroll_observation=np.zeros((size, 0, *shape), observation_spec.dtype.as_numpy_dtype),
                unroll_mask=np.zeros((size, 0), np.float32),
            )
        else:
            unrolled = batch.unroll_observation
            batch = batch._replace(unroll_observation=np.reshape(unrolled, (size, unrolled.shape[1], *shape)))
        if self.network.prefix_state is not None:
            horizon = self.network.value_prefix_horizon
            batch = batch._replace(target_reward=value_prefix_targets(batch.target_reward, horizon))
        if n == 0:
            return batch
        transform = self.network.value_transform
        return batch._replace(
            target_value=scalar_to_support(batch.target_value, n, transform),
            target_reward=scalar_to_support(batch.target_reward, n, transform),
        )

    def train_step(self, batch: Batch) -> dict[str, float | np.ndarray]:
        """One update on a sampled batch; returns `loss/...` (and every
        `run.grad_summary_interval` steps `grad/...`) metrics as floats, "train/finite",
        and "initial_value" ([B] numpy: the value predicted at k = 0, for priorities)."""
        interval = self.grad_summary_interval
        with_norms = interval > 0 and (self.training_step + 1) % interval == 0
        metrics = (self._step_with_norms if with_norms else self._step)(self.prepare(batch))
        self._training_step = int(metrics.pop("train/iterations"))
        self.network.steps = self._training_step
        return {name: value.numpy() if name == "initial_value" else float(value) for name, value in metrics.items()}

    def tracing_count(self) -> int:
        return self._step.experimental_get_tracing_count()


class StepResult(NamedTuple):
    """One training step on a replay batch.

    Attributes:
      metrics: `loss/...` (and `grad/...`) floats; `replay/importance_weight_max` with priorities.
      finite: the update was applied (false: skipped, a NaN or Inf in the loss or gradients).
      batch_seconds: building the batch from replay.
      step_seconds: the update itself.
    """

    metrics: dict
    finite: bool
    batch_seconds: float
    step_seconds: float


# The learner's inner step, as the pseudocode's train_network loop body: sample a batch,
# update the weights on it, then give its positions their new priorities.
def train_on_replay(
    learner: Learner,
    replay_buffer: ReplayBuffer,
    batch_hook: Callable[[Batch], Batch] | None = None,
    prefetcher: BatchPrefetcher | None = None,
) -> StepResult:
    """Samples a batch, takes one training step on it, refreshes the batch's priorities
    (after a finite step only).

    Args:
      batch_hook: tests only: transforms the sampled batch (fault injection).
      prefetcher: the batch comes from this thread's queue instead of `replay_buffer`
        (`StepResult.batch_seconds` is then the learner's wait for it).
    """
    # With Reanalyse, value targets bootstrap from the target network, reanalyse.td_steps ahead.
    t0 = time.perf_counter()
    sample = (prefetcher or replay_buffer).sample(learner.train.num_unroll_steps, learner.td_steps)
    batch = sample.batch if batch_hook is None else batch_hook(sample.batch)
    t1 = time.perf_counter()
    metrics = learner.train_step(batch)
    seconds = time.perf_counter() - t1
    initial_value = metrics.pop("initial_value")
    finite = bool(metrics.pop("train/finite"))
    if finite:
        replay_buffer.refresh_priorities(batch, initial_value, sample)
        if batch.importance_weight is not None:  # the largest weight shows how uneven sampling is
            metrics["replay/importance_weight_max"] = float(batch.importance_weight.max())
        if (reanalysed := sample.reanalysed) is not None:
            # Share of the batch whose policy target (k = 0) is a reanalysed one, and its age.
            fresh = reanalysed >= 0
            metrics["reanalyse/fraction_fresh"] = float(fresh.sum()) / len(batch.actions)
            if fresh.any():
                metrics["reanalyse/target_age"] = float(np.mean(learner.training_step - 1 - reanalysed[fresh]))
    return StepResult(metrics, finite, t1 - t0, seconds)


def train_network(
    train: TrainConfig,
    learner: Learner,
    replay_buffer: ReplayBuffer,
    storage: SharedStorage | None = None,
    num_steps: int | None = None,
) -> dict:
    """Pseudocode `train_network`: sample, update, publish every `train.checkpoint_interval` steps.

    Returns the last step's metrics (with "train/finite").
    """
    metrics: dict = {}
    steps = train.training_steps if num_steps is None else num_steps
    for _ in range(steps):
        if storage is not None and learner.training_step % train.checkpoint_interval == 0:
            storage.save_network(learner.training_step, learner.network)
        result = train_on_replay(learner, replay_buffer)
        metrics = {**result.metrics, "train/finite": float(result.finite)}
    if storage is not None:
        storage.save_network(learner.training_step, learner.network)
    return metrics
