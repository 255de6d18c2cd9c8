"""Typed configuration: the pseudocode's `MuZeroConfig`, grouped by section.

The fields carry the pseudocode's names (`num_simulations`, `pb_c_base`, `td_steps`, ...). YAML files map onto these
frozen dataclasses through `muzero.config_io`, which validates every key. This module imports no TensorFlow, so bad
input is reported before any heavy import happens.

Each field may carry `metadata` with a closed range ("min"/"max", inclusive, or "gt" for a strict lower bound) or "choices".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


def _range(**bounds) -> dict:  # a field's bounds: "min", "max", "gt" or "choices"
    return dict(bounds)


@dataclass(frozen=True)
class KnownBounds:
    """Known value bounds; seeds `MinMaxStats` (board games: KnownBounds(-1, 1))."""

    # Lowest value a (discounted) return can take.
    min: float
    # Highest value a (discounted) return can take.
    max: float


@dataclass(frozen=True)
class GameConfig:
    """What the game is and how returns are discounted."""

    # Which game, through which plug-in (`muzero.envs`): a gymnasium id ("CartPole-v1"), an ALE
    # id ("ALE/Pong-v5"), "<plugin>:<name>", or "<module>:<function>" for a game outside the package.
    id: str = "CartPole-v1"
    # The plug-in's settings: gymnasium.make's keyword arguments for a gymnasium id, the ALE wrapping
    # (`muzero.envs.atari.AtariSettings`) for an Atari game, the factory's keyword arguments for
    # "<module>:<function>". Checked against the plug-in's settings dataclass if it has one (then held as one).
    kwargs: Any = field(default_factory=dict)
    # Number of discrete actions; must match the environment's action space. Left out (or null) in a YAML file: read
    # from the environment.
    action_space_size: int = field(default=2, metadata=_range(min=1))
    # Game length cap (pseudocode `max_moves`).
    max_moves: int = field(default=500, metadata=_range(min=1))
    # Discount gamma used for targets and inside the search.
    discount: float = field(default=0.997, metadata=_range(gt=0.0, max=1.0))
    # The pseudocode treats the end of every game as absorbing (value 0 after it). When true, a game cut by a time limit
    # or max_moves (not ended) bootstraps its value targets from the network's value of its last observation instead.
    bootstrap_truncated: bool = False
    # Observation = the last `stacked_frames` frames and the actions that led to them
    # (paper, Atari: 32); 1 = the environment's observation as it is.
    stacked_frames: int = field(default=1, metadata=_range(min=1))


@dataclass(frozen=True)
class TemperatureSchedule:
    """Visit-softmax temperature as data (pseudocode `visit_softmax_temperature_fn`): `by` and `schedule` below."""

    # The counter the thresholds compare with: training steps (Atari) or moves played in the game (board games).
    by: str = field(default="training_steps", metadata=_range(choices=("training_steps", "num_moves")))
    # [threshold, temperature] pairs in order: the first threshold null or above the counter gives it (0: argmax).
    schedule: tuple[tuple[int | None, float], ...] = ((500_000, 1.0), (750_000, 0.5), (None, 0.25))


def visit_softmax_temperature(schedule: TemperatureSchedule, num_moves: int, training_steps: int) -> float:
    """The pseudocode's `visit_softmax_temperature_fn` over the `search.visit_softmax_temperature` schedule: the
    temperature of the first [threshold, temperature] pair whose threshold is None or above the counter `by` names."""
    counter = training_steps if schedule.by == "training_steps" else num_moves
    for threshold, temperature in schedule.schedule:
        if threshold is None or counter < threshold:
            return temperature
    return schedule.schedule[-1][1]


@dataclass(frozen=True)
class SearchConfig:
    """Self-play search constants (pseudocode values as defaults)."""

    # Simulations per move (each expands one leaf with one recurrent inference).
    num_simulations: int = field(default=50, metadata=_range(min=1))
    # Dirichlet(alpha) noise added to the root priors in self-play (pseudocode `add_exploration_noise`).
    root_dirichlet_alpha: float = field(default=0.25, metadata=_range(gt=0.0))
    # Share of the root prior the noise replaces: prior * (1 - frac) + noise * frac.
    root_exploration_fraction: float = field(default=0.25, metadata=_range(min=0.0, max=1.0))
    # pUCT exploration constants of `ucb_score`: c = log((N + pb_c_base + 1) / pb_c_base) + pb_c_init.
    pb_c_base: float = field(default=19652.0, metadata=_range(gt=0.0))
    # See pb_c_base.
    pb_c_init: float = field(default=1.25, metadata=_range(min=0.0))
    # Known value bounds seed `MinMaxStats` (board games: {min: -1, max: 1}); null: learnt from the tree.
    known_bounds: KnownBounds | None = None
    # "pseudocode": child.reward + discount * normalize(child.value()) (revision 2). "normalized_q":
    # normalize(child.reward + discount * child.value()), as muzero-general and mctx; MinMaxStats tracks those Qs.
    ucb_value: str = field(default="pseudocode", metadata=_range(choices=("pseudocode", "normalized_q")))
    # The smallest range Q-values are normalised over (EfficientZero's value_delta_max, 0.01): pUCT's `MinMaxStats`,
    # Gumbel's per-node rescale. 0: the pseudocode's (Gumbel: mctx's 1e-8), which stretches any range over [0, 1].
    min_value_range: float = field(default=0.0, metadata=_range(min=0.0))
    # pUCT (Gumbel ignores it): the root's network value counts as its first visit (mctx), so `ucb_score`'s prior term
    # is live from the first simulation, and the root's value (stored for value targets and priorities) averages it
    # with the simulations'. False: the pseudocode's root, unvisited: every child scores 0 in the first simulation, and
    # its tie rule spends it on the largest legal action (docs/choices.md).
    count_root_evaluation: bool = False
    # Whose point of view values and rewards take when players alternate (no-op with one player). "negamax": a node's
    # value is the view of the player to move there, negated for its parent when the other player moves there; a
    # reward (the mover's) enters the backup signed by the mover against the leaf's player. "pseudocode": as they are
    # (the pseudocode's backup `value = node.reward + discount * value` ignores whose reward it is; not with Gumbel).
    two_player_rule: str = field(default="negamax", metadata=_range(choices=("negamax", "pseudocode")))
    # Temperature of the visit-count softmax that picks self-play moves (pseudocode `visit_softmax_temperature_fn`).
    visit_softmax_temperature: TemperatureSchedule = TemperatureSchedule()
    # "puct": the paper's search (`run_mcts`): pUCT selection, Dirichlet noise at the root, the
    # move sampled from the visit counts, which are the policy target. "gumbel": Gumbel MuZero
    # (muzero/search/gumbel.py): Gumbel noise and sequential halving at the root, the move the
    # search selects (no temperature), softmax(logits + sigma(completed Q)) as the policy target.
    algorithm: str = field(default="puct", metadata=_range(choices=("puct", "gumbel")))
    # Gumbel: actions sampled at the root without replacement (Gumbel-top-k), among which
    # sequential halving shares the simulations (mctx's default).
    max_considered_actions: int = field(default=16, metadata=_range(min=1))
    # Gumbel: sigma(q) = (c_visit + max visits) * c_scale * q, q min-max normalised over the
    # node's completed Q-values (mctx's defaults: maxvisit_init 50, value_scale 0.1).
    c_visit: float = field(default=50.0, metadata=_range(min=0.0))
    # See c_visit.
    c_scale: float = field(default=0.1, metadata=_range(gt=0.0))
    # The searches of self-play, evaluation's greedy episodes and Reanalyse start from the position's image under a
    # symmetry of the game drawn uniformly (one per search; AlphaGo Zero drew one per evaluation), statistics mapped
    # back: a model favouring one orientation steers fewer moves. Not matches, `muzero play`, the exact match; batched.
    random_symmetry: bool = False


@dataclass(frozen=True)
class SelfPlayConfig:
    """How self-play searches: the reference (one game) or batched over many games."""

    # false: `play_game` with the reference `run_mcts`, one game at a time, as in the pseudocode. true:
    # `BatchedSelfPlay`, a game in progress in each of num_envs environments, one batched search
    # (`run_batched_mcts`, tested equal to the reference) per move for all; the learner catches up after every move.
    batched: bool = False
    # With batched: games played side by side, one batched search per move for all of them.
    num_envs: int = field(default=1, metadata=_range(min=1))
    # Pull the newest network from shared storage every this many moves. (Exact resume
    # assumes 1: the network in use is then always the one last published.)
    refresh_interval: int = field(default=1, metadata=_range(min=1))
    # With batched: "numpy" runs run_batched_mcts (numpy arrays, numpy network); "compiled" runs the same search as one
    # TensorFlow graph (CompiledSearch) on a Keras copy of the published weights, with XLA when jit_compile is true.
    search: str = field(default="numpy", metadata=_range(choices=("numpy", "compiled")))
    # With the compiled search: compile it with XLA.
    jit_compile: bool = True
    # Two-player games: the first this many moves of each game are uniformly random legal moves, so the policy does not
    # collapse onto the few openings it trains on (tic-tac-toe: all draws; docs/boardgames.md); 0: none (pseudocode).
    random_opening_moves: int = field(default=0, metadata=_range(min=0))
    # Every self-play move is a uniformly random legal move while the network playing has trained fewer than this many
    # steps, as DQN starts; that network is the last published (train.checkpoint_interval; on Ray, the one a call was
    # sent with), so 1 means until the first network published after step 0, the warm-up (replay.min_games) included.
    # 0: off (the pseudocode).
    random_moves_before_step: int = field(default=0, metadata=_range(min=0))
    # The policy target of those random moves: "visits", the search's (Gumbel: its improved policy), as any move's;
    # "uniform" over the legal actions, so an untrained search's lean is not trained in. Reanalyse replaces either.
    random_move_policy_target: str = field(default="visits", metadata=_range(choices=("visits", "uniform")))
    # With batched: a game in progress hands its moves to replay this many at a time (a segment, with the next
    # num_unroll_steps + td_steps moves for its targets), not only when it ends (docs/segments.md). 0: whole games.
    segment_length: int = field(default=0, metadata=_range(min=0))


@dataclass(frozen=True)
class NetworkConfig:
    """The network family: "mlp" for vector observations, "resnet" for images (Atari)."""

    # "mlp" for vector observations; "resnet" for images (the paper's Atari network) or boards.
    kind: str = field(default="mlp", metadata=_range(choices=("mlp", "resnet")))
    # mlp: size of the hidden state s (scaled to [0, 1] per sample).
    hidden_state_size: int = field(default=32, metadata=_range(min=1))
    # mlp: widths of the hidden layers in each of the three functions.
    # resnet: widths of the fully connected layers of the value, reward and policy heads.
    hidden_layers: tuple[int, ...] = (64,)
    # resnet: planes of the hidden state and of every convolution at 6x6 (paper: 256); half in the first downsampling.
    planes: int = field(default=256, metadata=_range(min=2))
    # resnet: residual blocks after the downsampling in the representation and in the dynamics (paper: 16 each).
    blocks: int = field(default=16, metadata=_range(min=0))
    # resnet: the paper's 96x96 -> 6x6 downsampling stack before the blocks. false: one
    # 3x3 convolution to `planes` planes at the frame's own size (MinAtar's 10x10 frames).
    downsample: bool = True
    # resnet: the action as the dynamics sees it. "tiled": its one-hot tiled into A constant planes (the paper's
    # Atari). "board": one plane marking where it acts, its cell or its column (the paper's Go; board games).
    action_planes: str = field(default="tiled", metadata=_range(choices=("tiled", "board")))
    # Activation of the hidden layers.
    activation: str = field(default="elu", metadata=_range(choices=("relu", "elu", "tanh")))
    # 0: value and reward are scalars trained with MSE. n > 0: categorical over the
    # integers -n..n after the h(x) transform, trained with cross-entropy (the paper's Atari: 300).
    support_size: int = field(default=10, metadata=_range(min=0))
    # With support_size > 0: h(x) before the support (the paper's Atari). false: no squash; board
    # games' 3 bins (support_size 1) are then win / draw / loss (h(1) puts 0.59 on the draw bin).
    value_transform: bool = True
    # Not in MuZero: EfficientZero's value prefix (docs/value_prefix.md). true: the reward head predicts
    # the sum of rewards since the root through an LSTM; a node's reward is its prefix minus its parent's.
    value_prefix: bool = False
    # With value_prefix: LSTM units (EfficientZero's Atari: 512). 32: h, c, prefix, count fit a 10x10 plane.
    lstm_hidden_size: int = field(default=32, metadata=_range(min=1))
    # With value_prefix: the LSTM and the prefix restart every this many steps (EfficientZero: 5).
    value_prefix_horizon: int = field(default=5, metadata=_range(min=1))
    # For train.consistency_loss_weight. 0: the hidden states compared directly (centred cosine).
    # n > 0: EfficientZero's SimSiam heads, a projection to n units and a prediction head on the dynamics' side.
    projection_size: int = field(default=0, metadata=_range(min=0))
    # Not in MuZero: the reward, value and policy heads' output layers start at zero (EfficientZero's init_zero, on in
    # its Atari config), so an untrained network says value 0, reward 0 and a uniform prior. false: Keras's default.
    init_zero: bool = False


@dataclass(frozen=True)
class TrainConfig:
    """Learner constants (pseudocode `update_weights` / `train_network`)."""

    # Training steps (`update_weights` calls) of the run (pseudocode `training_steps`).
    training_steps: int = field(default=1_000_000, metadata=_range(min=1))
    # Network published to shared storage (and checkpointed) every this many steps.
    checkpoint_interval: int = field(default=1000, metadata=_range(min=1))
    # Positions per training batch.
    batch_size: int = field(default=1024, metadata=_range(min=1))
    # K: recurrent steps the dynamics function is unrolled for in `update_weights`.
    num_unroll_steps: int = field(default=5, metadata=_range(min=1))
    # n of the n-step value target (pseudocode `make_target`); board games in the paper: the game's length.
    td_steps: int = field(default=10, metadata=_range(min=1))
    # L2 penalty on the weights, added to the loss (pseudocode: weight_decay * sum of tf.nn.l2_loss).
    weight_decay: float = field(default=1e-4, metadata=_range(min=0.0))
    # "sgd": the pseudocode's SGD with momentum. "adam": Adam (not in MuZero; Revisiting Rainbow on MinAtar
    # and Stoix's MuZero use it), its beta_1 the momentum below; weight_decay stays L2 in the loss.
    optimizer: str = field(default="sgd", metadata=_range(choices=("sgd", "adam")))
    # SGD's momentum, or Adam's beta_1.
    momentum: float = field(default=0.9, metadata=_range(min=0.0, max=1.0))
    # Learning rate lr_init * lr_decay_rate ^ (training step / lr_decay_steps), as the pseudocode.
    lr_init: float = field(default=0.05, metadata=_range(gt=0.0))
    # The learning rate is multiplied by this every lr_decay_steps training steps (smoothly).
    lr_decay_rate: float = field(default=0.1, metadata=_range(gt=0.0, max=1.0))
    # Training steps over which the learning rate decays by lr_decay_rate.
    lr_decay_steps: float = field(default=350e3, metadata=_range(gt=0.0))
    # A NaN or Inf in the loss or gradients: "skip" the update (weights unchanged, counted as
    # train/nonfinite_skips) or "stop" the run; skipping stops too after max_consecutive_nonfinite.
    nonfinite: str = field(default="skip", metadata=_range(choices=("skip", "stop")))
    # Compile the training step with XLA (tf.function(jit_compile=True)).
    jit_compile: bool = False
    # With nonfinite "skip": consecutive skipped updates before the run stops.
    max_consecutive_nonfinite: int = field(default=10, metadata=_range(min=1))
    # Not in the pseudocode (its actors and learner run concurrently): training steps per self-play move, as a ratio.
    steps_per_move: float = field(default=0.5, metadata=_range(gt=0.0))
    # Not in the pseudocode: steps_per_move counts the moves of games saved to replay, not the
    # moves played (the learner waits for games in progress; docs/reanalyse.md: no better).
    count_stored_moves: bool = False
    # Weight of the value loss against the reward and policy losses (the paper's Reanalyse:
    # 0.25, so that the value does not overfit re-used positions; 1 in the pseudocode).
    value_loss_weight: float = field(default=1.0, metadata=_range(min=0.0))
    # Not in MuZero: EfficientZero's (Ye et al. 2021) self-supervised consistency loss. With a weight w > 0, each
    # unroll step k >= 1 adds w * (1 - cosine(dynamics state s_k, representation of the real observation o_{t+k}, no
    # gradient)) to its loss (through EfficientZero's heads with `network.projection_size`), so that the model tracks
    # the real game between sparse rewards; each batch then holds B * K more observations. 0: MuZero.
    consistency_loss_weight: float = field(default=0.0, metadata=_range(min=0.0))
    # Resnet: compute in bfloat16 with float32 weights (Keras "mixed_bfloat16"); for GPUs.
    # Self-play without a GPU searches in float32 whatever this says. The MLP ignores it.
    mixed_precision: bool = False


@dataclass(frozen=True)
class ReplayConfig:
    """Replay buffer (pseudocode `ReplayBuffer`)."""

    # Newest games kept (the pseudocode's window counts games, not positions).
    window_size: int = field(default=1_000_000, metadata=_range(min=1))
    # Also at most this many bytes of games, counted as TensorBoard's replay/bytes counts them
    # (`muzero.replay.buffer.game_nbytes`); the oldest games leave first. 0: no bound.
    max_bytes: int = field(default=0, metadata=_range(min=0))
    # Training starts once this many games are in the buffer.
    min_games: int = field(default=1, metadata=_range(min=1))
    # "position": game drawn with probability proportional to its length, so every
    # stored position is equally likely. "game": uniform over games (pseudocode).
    sample_by: str = field(default="position", metadata=_range(choices=("position", "game")))
    # Prioritized replay (paper appendix): position i is drawn with probability P(i) = p_i^alpha / sum_j p_j^alpha
    # over the positions in the window, with priority p_i = |root value - n-step value target| + priority_epsilon when
    # the game is saved, then |the network's value at k = 0 (in training mode) - target| after each training step for
    # the sampled positions. 0 (default): no priorities, sampling as `sample_by` says; alpha > 0 replaces `sample_by`.
    # The paper uses 1.
    priority_alpha: float = field(default=0.0, metadata=_range(min=0.0))
    # Each sample's loss is scaled by its importance weight (1 / (N * P(i)))^beta, N the
    # positions in the window (not max-normalised: docs/choices.md). The paper uses 1.
    priority_beta: float = field(default=1.0, metadata=_range(min=0.0, max=1.0))
    # Added to every priority, so that a position whose value is predicted exactly
    # (|v - z| = 0) can still be drawn; it also bounds the largest importance weight.
    priority_epsilon: float = field(default=1e-3, metadata=_range(min=0.0))
    # Divide each batch's importance weights by their largest (Schaul et al. 2016; most
    # implementations do): every weight <= 1, steps never amplified by a rarely drawn
    # position. false: the appendix's (1 / (N * P(i)))^beta as written.
    normalize_importance_weights: bool = False
    # Each sampled position is mapped by one of the game's symmetries drawn uniformly (muzero/symmetries.py; AlphaGo
    # Zero's augmentation, not MuZero's): tic-tac-toe's 8, connect four's mirror, CartPole's mirror (every number
    # negated, left and right swapped). Games without known symmetries refuse it.
    augment_symmetries: bool = False
    # Off-policy correction (EfficientZero, Ye et al. 2021): the value target of a position
    # bootstraps one step sooner for every this many training steps between its game's
    # arrival in replay and the newest game's, n = max(1, n - age // this): an old game was
    # played by an old policy, whose rewards say less about the current one. 0: off (the paper).
    off_policy_correction_steps: int = field(default=0, metadata=_range(min=0))


@dataclass(frozen=True)
class RunConfig:
    """Bookkeeping that is not part of the algorithm."""

    # Seeds every random number generator of the run (numpy, Python, TensorFlow, the environments).
    seed: int = field(default=0, metadata=_range(min=0))
    # Seconds between progress lines on the terminal.
    log_every_seconds: float = field(default=10.0, metadata=_range(gt=0.0))
    # GiB the run may use (muzero/memory.py estimates it at start, before any heavy work, and
    # refuses a config that would need more); 0: the machine's available memory.
    memory_limit: float = field(default=0.0, metadata=_range(min=0.0))
    # Training ends as at train.training_steps (a final checkpoint and evaluation) once the run has trained this many
    # minutes, counted over all its sessions (a resume carries its time on): a wall-time budget. 0: no limit.
    time_limit_minutes: float = field(default=0.0, metadata=_range(min=0.0))
    # Greedy evaluation every this many training steps (0: never), over this many episodes.
    eval_interval: int = field(default=0, metadata=_range(min=0))
    # Greedy episodes per evaluation.
    eval_episodes: int = field(default=10, metadata=_range(min=1))
    # Simulations per greedy search in evaluations (episodes, matches) and evaluate/play; 0: search.num_simulations.
    eval_simulations: int = field(default=0, metadata=_range(min=0))
    # Every evaluation records its first greedy episode as RUN_DIR/videos/step-<N>.mp4
    # (muzero/video.py) when the game draws itself (gymnasium's rgb_array rendering:
    # Atari, MinAtar, CartPole with pygame); a game that cannot is warned about once.
    record_video: bool = True
    # Two-player games: at every evaluation, this many games (half as first player) against each opponent ("random",
    # "perfect", "mcts:N"; muzero/arena.py), into eval/<opponent>/{win,draw,loss} and eval_opponents.csv.
    eval_opponents: tuple[str, ...] = ()
    # Two-player games: games per opponent at each evaluation.
    eval_games: int = field(default=100, metadata=_range(min=2))
    # Gradient-norm summaries (grad/...) every this many training steps; 0: off.
    grad_summary_interval: int = field(default=0, metadata=_range(min=0))
    # The newest complete checkpoints kept on disk (muzero/checkpoints.py).
    max_checkpoints: int = field(default=3, metadata=_range(min=1))
    # Besides those, the first checkpoint at or after every multiple of this many training
    # steps is kept for good, so that a run that slowly diverged has older points to go
    # back to (TensorFlow's keep_checkpoint_every_n_hours, in steps); 0: off.
    keep_checkpoint_every_steps: int = field(default=0, metadata=_range(min=0))


@dataclass(frozen=True)
class ReanalyseConfig:
    """MuZero Reanalyze (paper appendix): fresher targets for stored positions.

    Reanalyse re-runs the search on positions already in replay with the newest network
    and stores the root visit distributions it finds (not its root values). When on
    (`fraction` > 0), that fraction of the sampled positions takes its policy target
    from those fresh statistics, and every value target bootstraps from a target network
    θ⁻ (a copy of the weights refreshed every `target_network_interval` training steps)
    over `td_steps` steps instead of from the stored search values.
    """

    # Share of sampled positions whose policy target comes from reanalysed statistics
    # (the paper: 0.8). 0 (default): off, training exactly as without Reanalyse.
    fraction: float = field(default=0.0, metadata=_range(min=0.0, max=1.0))
    # Dirichlet noise at the root of each reanalyse search, as in self-play (EfficientZero and LightZero do the same;
    # the paper does not say). Measured on CartPole: without it a network that prefers one action finds all 50 visits on
    # that action, the targets become one-hot and the policy collapses (greedy return 9 after 5,000 steps).
    root_noise: bool = True
    # Bootstrap horizon n of value targets while Reanalyse is on (the paper: 5; CartPole, a reward every step: 20 halved its moves on 3 seeds of 3, 5 on 1: docs/reanalyse.md).
    td_steps: int = field(default=5, metadata=_range(min=1))
    # Training steps between refreshes of the target network θ⁻.
    target_network_interval: int = field(default=100, metadata=_range(min=1))
    # Local back end: positions reanalysed per training step (searched in batches of `batch_size`).
    positions_per_step: float = field(default=1.0, metadata=_range(min=0.0))
    # Positions searched at once by one batched search.
    batch_size: int = field(default=256, metadata=_range(min=1))
    # Ray back end: reanalyse actors beside the self-play actors.
    num_actors: int = field(default=1, metadata=_range(min=0))


def parse_opponent(name: str) -> tuple[str, int]:
    """A board-game opponent's name (`run.eval_opponents`, `evaluate --opponent`) as (kind,
    simulations): "random" and "perfect" -> (name, 0); "mcts:N" -> ("mcts", N), N >= 1.

    Raises:
      ValueError: any other name, with a one-line message.
    """
    kind, _, count = name.partition(":")
    if name in ("random", "perfect"):
        return name, 0
    if kind == "mcts" and count.isdigit() and int(count) > 0:
        return kind, int(count)
    raise ValueError(f"expected random, perfect or mcts:N (N simulations), got {name!r}")


@dataclass(frozen=True)
class ActorsConfig:
    """Self-play actors of the Ray back end (`muzero train`'s default `--backend auto` on a
    machine with 2 cores or more, or `--backend ray`; unused by `local`).

    Each actor plays `selfplay.num_envs` games in lockstep with the batched search (`BatchedSelfPlay`),
    `moves_per_call` moves per call; the games that ended come back with it, and the newest weights go with the next.
    """

    # Self-play actors (processes), each with its own games. 0: one per core (os.cpu_count(), or the cluster's CPUs
    # with --ray-address), so that learner and self-play keep every core busy whichever is slower (docs/concurrency.md).
    num_actors: int = field(default=0, metadata=_range(min=0))
    # Batched moves per call (one in each of the actor's games): how often it hands back ended games and takes the newest
    # weights. Small keeps data fresh (CartPole learnt faster with 5 than 25: docs/ray.md); many actors need larger.
    moves_per_call: int = field(default=5, metadata=_range(min=1))
    # Backpressure: calls handed to an actor and not yet collected. At most num_actors * max_inflight_per_actor calls'
    # worth of games wait outside replay. 2: an actor has its next call queued while the driver collects the last one
    # (with 1 it idles then; docs/concurrency.md).
    max_inflight_per_actor: int = field(default=2, metadata=_range(min=1))
    # Restarts Ray makes of each actor that dies or is killed as hung (-1: no limit).
    max_restarts: int = field(default=3, metadata=_range(min=-1))
    # Fewer actors alive than this (restarts used up): the run stops with a checkpoint.
    min_live_actors: int = field(default=1, metadata=_range(min=1))
    # A call running longer than this is taken for a hung actor, killed and restarted; covers its start (XLA) on call 1.
    call_timeout_seconds: float = field(default=300.0, metadata=_range(gt=0.0))
    # Ray resources per actor (with 0 GPUs an actor hides the GPUs from TensorFlow).
    cpus_per_actor: float = field(default=1.0, metadata=_range(gt=0.0))
    # GPUs per actor (fractions share one GPU).
    gpus_per_actor: float = field(default=0.0, metadata=_range(min=0.0))


@dataclass(frozen=True)
class MuZeroConfig:
    """The whole configuration; the pseudocode's `MuZeroConfig`, grouped by section."""

    game: GameConfig = GameConfig()
    search: SearchConfig = SearchConfig()
    selfplay: SelfPlayConfig = SelfPlayConfig()
    network: NetworkConfig = NetworkConfig()
    train: TrainConfig = TrainConfig()
    replay: ReplayConfig = ReplayConfig()
    run: RunConfig = RunConfig()
    actors: ActorsConfig = ActorsConfig()
    reanalyse: ReanalyseConfig = ReanalyseConfig()

    # Flat aliases so code reads like the pseudocode (`config.discount`, ...).
    @property
    def action_space_size(self) -> int:
        return self.game.action_space_size

    @property
    def max_moves(self) -> int:
        return self.game.max_moves

    @property
    def discount(self) -> float:
        return self.game.discount

    def visit_softmax_temperature_fn(self, num_moves: int, training_steps: int) -> float:
        """Temperature for `select_action` from the schedule held as data."""
        return visit_softmax_temperature(self.search.visit_softmax_temperature, num_moves, training_steps)

    def replace(self, **sections) -> MuZeroConfig:
        """A copy with whole sections or fields replaced (tests use this)."""
        return dataclasses.replace(self, **sections)
