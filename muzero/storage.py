"""`SharedStorage`: where the learner publishes networks and actors pick up the newest."""

from __future__ import annotations

from muzero.networks.base import Network, make_uniform_network


class SharedStorage:
    """Holds the newest published network, as a TensorFlow-free numpy copy.

    The pseudocode keeps every saved network in a dict; only the newest is ever
    read, so this keeps just that one (memory stays flat over long runs).

    Args:
      action_space_size: for the uniform network returned before any save.
    """

    def __init__(self, action_space_size: int):
        self._action_space_size = action_space_size
        self._step = -1
        self._network: Network | None = None

    def latest_network(self) -> Network:
        if self._network is not None:
            return self._network
        # policy -> uniform, value -> 0, reward -> 0
        return make_uniform_network(self._action_space_size)

    def save_network(self, step: int, network) -> None:
        """Publishes `network` (anything with `published_network(steps)`) as trained for `step` steps."""
        self._step = step
        self._network = network.published_network(step)

    def latest_step(self) -> int:
        """Training step of the newest network; -1 before any save."""
        return self._step
