"""The pseudocode's `Network` interface, and the networks every family shares.

Everything that searches (`run_mcts`, `play_game`) sees a network only through
`initial_inference(observation)` and `recurrent_inference(hidden_state, action)`,
both on batches, as in the pseudocode. The implementations:

* `UniformNetwork` (here): uniform policy, value 0, reward 0; what
  `SharedStorage.latest_network()` returns before any network was saved.
* `NumpyMLPNetwork` (`numpy_mlp.py`): the learner's MLP weights evaluated with numpy,
  for self-play (tested equal to the Keras network).
* `MLPNetwork` (`mlp.py`) and `ResNetwork` (`resnet.py`, images): the Keras networks the
  learner trains, on `KerasNetwork` (`keras.py`).
* `PublishedWeights` (here): a published resnet's weights, which only the compiled
  search (`muzero.search.compiled_searcher.CompiledSearcher`) runs (a resnet is too slow in numpy).

Hidden states are min-max scaled to [0, 1] per sample (paper appendix), in all of them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

# A hidden state whose elements span less than this is divided by it instead.
MIN_MAX_EPSILON = 1e-5


def image_shape(stacked_frames: int, observation_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Shape of the representation's input, `Game.make_image`'s output, for environment
    observations of `observation_shape`: the observation itself, or [H, W, n * C + n] for
    n > 1 stacked frames and the n planes of the actions that led to them."""
    if stacked_frames == 1:
        return tuple(observation_shape)
    height, width, channels = observation_shape
    return height, width, stacked_frames * channels + stacked_frames


class NetworkOutput(NamedTuple):
    """What inference returns, batched.

    Attributes:
      value: [B] scalar value estimates.
      reward: [B] scalar rewards predicted for the transition into this state (0 at
        the root, which has no incoming transition).
      policy_logits: [B, num_actions].
      hidden_state: [B, *hidden_shape] ([B, H] for the MLP, [B, 6, 6, P] for the resnet),
        each sample scaled to [0, 1]; with `network.value_prefix`, augmented with the LSTM
        state, the prefix and a step count, which are not scaled (`keras.ValuePrefixState`).
      value_logits: [B, 2n + 1] (categorical support) or [B] (scalar); training only.
      reward_logits: like value_logits; with value prefix, the prefix's logits.
    """

    value: object
    reward: object
    policy_logits: object
    hidden_state: object
    value_logits: object | None = None
    reward_logits: object | None = None

    def item(self, index: int) -> NetworkOutput:
        """Row `index` of a batched numpy output, for the one-tree reference search."""
        return NetworkOutput(
            value=float(self.value[index]),
            reward=float(self.reward[index]),
            policy_logits=np.asarray(self.policy_logits[index]),
            hidden_state=np.asarray(self.hidden_state[index]),
        )


class Network:
    """Interface of the pseudocode's `Network`."""

    def initial_inference(self, observation) -> NetworkOutput:
        """representation + prediction: observation [B, ...] -> NetworkOutput."""
        raise NotImplementedError

    def recurrent_inference(self, hidden_state, action) -> NetworkOutput:
        """dynamics + prediction: hidden_state [B, *hidden_shape], action [B] int -> NetworkOutput."""
        raise NotImplementedError

    def training_steps(self) -> int:
        """How many training steps produced these weights."""
        raise NotImplementedError


class UniformNetwork(Network):
    """Uniform policy, value 0, reward 0 (pseudocode `make_uniform_network`)."""

    def __init__(self, action_space_size: int, hidden_state_size: int = 1):
        self.action_space_size = action_space_size
        self.hidden_state_size = hidden_state_size

    def _output(self, batch: int) -> NetworkOutput:
        return NetworkOutput(
            value=np.zeros(batch, np.float32),
            reward=np.zeros(batch, np.float32),
            policy_logits=np.zeros((batch, self.action_space_size), np.float32),
            hidden_state=np.zeros((batch, self.hidden_state_size), np.float32),
        )

    def initial_inference(self, observation) -> NetworkOutput:
        return self._output(len(observation))

    def recurrent_inference(self, hidden_state, action) -> NetworkOutput:
        return self._output(len(action))

    def training_steps(self) -> int:
        return 0


def make_uniform_network(action_space_size: int, hidden_state_size: int = 1) -> UniformNetwork:
    """The network actors use before the learner saved one."""
    return UniformNetwork(action_space_size, hidden_state_size)


class PublishedWeights(Network):
    """A published network that only a search holding a Keras copy can run (the resnet:
    too slow in numpy). `CompiledSearcher.bind` loads its weights.

    Attributes:
      weights: {function: [numpy arrays in Keras order]}.
    """

    def __init__(self, weights: dict, action_space_size: int, steps: int):
        self.weights = weights
        self.action_space_size = action_space_size
        self._steps = steps

    def initial_inference(self, observation) -> NetworkOutput:
        raise TypeError("these weights run only inside the compiled search (selfplay.search: compiled)")

    recurrent_inference = initial_inference

    def training_steps(self) -> int:
        return self._steps
