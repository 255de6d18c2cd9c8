"""The package's shape: imports point one way, games are plug-ins (muzero/envs/__init__.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from muzero.envs import EnvironmentSpecError, check_environment, resolve_game
from muzero.envs.atari import AtariEnvironment
from muzero.envs.gym import GymEnvironment
from tests.helpers import ROOT, muzero_command
from tests.toy_game import LineWalk

PACKAGE = ROOT / "muzero"
TOY = str(ROOT / "tests" / "data" / "toy_game.yaml")
FAMILIES = ("muzero.envs", "muzero.networks", "muzero.search")
# What a family may import besides the families themselves: the modules below them.
BELOW_FAMILIES = {"muzero.config", "muzero.support", "muzero.gradient_scaling", "muzero.symmetries"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The muzero modules `path` imports, at module level or inside functions, but not the
    ones imported only for type checking (`if TYPE_CHECKING:`)."""
    tree = ast.parse(path.read_text())
    type_checking = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and getattr(block.test, "id", None) == "TYPE_CHECKING"
        for node in ast.walk(block)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_checking:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {name for name in found if name == "muzero" or name.startswith("muzero.")}


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {
        name: {target for target in _imports(path) if target in modules and target != name}
        for name, path in modules.items()
    }


def test_the_package_has_no_import_cycle():
    graph = _graph()
    # muzero/__init__.py re-exports the pseudocode's names from below; nothing imports it.
    assert not [name for name, targets in graph.items() if "muzero" in targets]
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for target in sorted(graph[name]):
            if state.get(target) == "open":
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(target) :] + [target]))
            if target not in state:
                visit(target, path + [target])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def test_families_import_only_families_and_what_is_below_them():
    for name, targets in _graph().items():
        if name.startswith(FAMILIES):
            above = {t for t in targets if not t.startswith(FAMILIES) and t not in BELOW_FAMILIES}
            assert not above, f"{name} imports {sorted(above)}"


# Modules allowed to take the whole `MuZeroConfig`: the builder (and its factories, which Ray
# actors call too) unpacks it for everything else,
# the CLI and config loading read it, and the reference search keeps the pseudocode's
# `run_mcts(config, ...)` family so that it reads beside the paper.
WHOLE_CONFIG_MODULES = {
    "muzero.builder",
    "muzero.factories",
    "muzero.cli",
    "muzero.commands",
    "muzero.config",
    "muzero.config_io",
    "muzero.config_checks",
    "muzero.config_loader",
    "muzero.search.reference",
    "muzero.search.gumbel",  # the reference Gumbel search, written as `run_mcts(config, ...)` is
}
# At most this many signatures elsewhere (issue 32): the pseudocode's `play_game(config, ...)` and
# the few entry points that build their own parts in another process (Ray actors).
MAX_WHOLE_CONFIG_SIGNATURES = 10
# Imports across layers that the layering forbids (importer prefix, imported prefix, why).
FORBIDDEN_IMPORTS = [
    ("muzero.config", "muzero.envs", "config loading is below the game plug-ins"),
    ("muzero.config_io", "muzero.envs", "config loading is below the game plug-ins"),
    ("muzero.config_checks", "muzero.envs", "config loading is below the game plug-ins"),
    ("muzero.networks", "muzero.envs", "a network gets the board shape from EnvironmentSpec"),
    # The compiled search builds no network: it gets a factory (it may use the family's types).
    ("muzero.search.compiled", "muzero.networks.__init__", "the compiled search gets a network factory"),
    ("muzero.search.compiled", "muzero.networks.keras", "the compiled search gets a network factory"),
    ("muzero.search.compiled_searcher", "muzero.networks.__init__", "the compiled searcher gets a network factory"),
    ("muzero.search.compiled_searcher", "muzero.networks.keras", "the compiled searcher gets a network factory"),
    ("muzero.cli", "muzero.networks.base", "the CLI uses the networks package's public functions"),
    ("muzero.cli", "muzero.networks.numpy_mlp", "the CLI uses the networks package's public functions"),
]
# A private attribute read on another object, allowed: the namedtuple API.
NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}


def _annotation_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    arguments = function.args
    every = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
    every += [arg for arg in (arguments.vararg, arguments.kwarg) if arg is not None]
    return [ast.unparse(arg.annotation).strip("'\"") for arg in every if arg.annotation is not None]


def whole_config_signatures() -> list[str]:
    """`module:function` of every function or method outside WHOLE_CONFIG_MODULES with a
    parameter annotated `MuZeroConfig`."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        if module in WHOLE_CONFIG_MODULES:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                name.split(".")[-1] == "MuZeroConfig" for name in _annotation_names(node)
            ):
                found.append(f"{module}:{node.name}")
    return found


def test_few_signatures_take_the_whole_config():
    found = whole_config_signatures()
    assert len(found) <= MAX_WHOLE_CONFIG_SIGNATURES, f"{len(found)} signatures take MuZeroConfig: {found}"


def test_the_whole_config_count_sees_annotations(tmp_path):
    # The counter finds the annotation however it is written: a plain name, a string, a dotted path.
    tree = ast.parse(
        "def a(config: MuZeroConfig): ...\n"
        "def b(x, config: 'MuZeroConfig' = None): ...\n"
        "def c(*, c: muzero.config.MuZeroConfig): ...\n"
        "def d(train: TrainConfig): ...\n"
    )
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    takes = [f.name for f in functions if any(n.split(".")[-1] == "MuZeroConfig" for n in _annotation_names(f))]
    assert takes == ["a", "b", "c"]


@pytest.mark.parametrize("importer, imported, why", FORBIDDEN_IMPORTS)
def test_no_import_across_layers(importer, imported, why):
    graph = _graph()
    # "pkg.__init__" names the package module itself, not its submodules.
    package_only = imported.endswith(".__init__")
    imported = imported.removesuffix(".__init__")
    offenders = {
        name: sorted(t for t in targets if t == imported or (not package_only and t.startswith(imported + ".")))
        for name, targets in graph.items()
        if name == importer or name.startswith(importer + ".")
    }
    assert not {k: v for k, v in offenders.items() if v}, f"{offenders} ({why})"


def test_the_config_layer_imports_nothing_above_it():
    # config.py imports no muzero module; config_checks.py only config.py; config_io.py only those two.
    graph = _graph()
    assert graph["muzero.config"] == set()
    assert graph["muzero.config_checks"] <= {"muzero.config"}, graph["muzero.config_checks"]
    assert graph["muzero.config_io"] <= {"muzero.config", "muzero.config_checks"}, graph["muzero.config_io"]


def test_no_private_attribute_is_read_on_another_modules_object():
    # `other._name` is a reach-in unless `_name` is an attribute this module's own classes set
    # (`self._name = ...`), as ActionHistory.clone copies its own private field, or a
    # subclass's `super()._name`.
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        own = {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
        }
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")):
                continue
            if node.attr.startswith("__") or node.attr in NAMEDTUPLE_API or node.attr in own:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if ast.unparse(node.value) == "super()":  # a subclass extending its own method
                continue
            offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not offenders, offenders


def test_no_module_is_over_450_lines():
    long = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > 450}
    assert not long, long


def test_the_runner_holds_the_loop_and_the_builder_the_parts():
    # The loop makes no part itself: no network, learner, replay, searcher or environment factory.
    runner = _imports(PACKAGE / "runner.py")
    assert not runner & {"muzero.networks", "muzero.search", "muzero.envs", "muzero.builder"}, runner
    assert "muzero.runner" in _imports(PACKAGE / "builder.py")


@pytest.mark.parametrize(
    "game_id, plugin, name",
    [
        ("CartPole-v1", "gym", "CartPole-v1"),
        ("gym:CartPole-v1", "gym", "CartPole-v1"),
        ("ALE/Pong-v5", "atari", "ALE/Pong-v5"),
        ("atari:ALE/Pong-v5", "atari", "ALE/Pong-v5"),
        ("tests.toy_game:make_line_walk", "tests.toy_game:make_line_walk", "tests.toy_game:make_line_walk"),
    ],
)
def test_game_id_selects_the_plugin(game_id, plugin, name):
    found, found_name = resolve_game(game_id)
    assert (found.name, found_name) == (plugin, name)


def test_environments_follow_the_protocol():
    from muzero.config import GameConfig
    from muzero.envs import Environment, make_environment
    from muzero.envs.atari import AtariSettings

    for game, cls in (
        (GameConfig(), GymEnvironment),
        (GameConfig(id="ALE/Pong-v5", kwargs=AtariSettings()), AtariEnvironment),
        (GameConfig(id="tests.toy_game:make_line_walk", kwargs={"length": 4}), LineWalk),
    ):
        env = make_environment(game, seed=0)
        assert isinstance(env, cls) and isinstance(env, Environment)
        assert env.reset().dtype == env.observation_dtype and env.to_play() == 0
        env.close()
    # The external game's settings reach its factory: 4 cells, one-hot observation.
    spec = check_environment(GameConfig(id="tests.toy_game:make_line_walk", kwargs={"length": 4}))
    assert spec.observation_shape == (4,) and spec.num_players == 1


def test_an_unknown_game_module_is_a_spec_error():
    with pytest.raises(EnvironmentSpecError, match="cannot import the game module 'no_such_module'"):
        resolve_game("no_such_module:make")


@pytest.mark.slow
def test_a_game_from_outside_the_package_trains_through_the_cli(tmp_path):
    # One module (tests/toy_game.py) and one YAML file: 6 training steps, then an evaluation.
    run_dir = tmp_path / "run"
    result = muzero_command("train", "--config", TOY, "--logdir", str(run_dir))
    assert result.returncode == 0, result.stderr[-3000:]
    assert (run_dir / "checkpoints" / "ckpt-6.complete").is_file()
    assert "length: 7" in (run_dir / "config.yaml").read_text()  # game.kwargs kept for resume
    result = muzero_command("evaluate", "--run", str(run_dir), "--episodes", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    # Line walk pays 1 only for reaching the right end: a mean return in [0, 1].
    mean = float(result.stdout.split("mean return ")[1].split()[0])
    assert 0.0 <= mean <= 1.0


@pytest.mark.parametrize(
    "override, fragment",
    [
        (
            "game.kwargs.width=3",
            ("game.kwargs: tests.toy_game:make_line_walk: make_line_walk() got an unexpected keyword argument 'width'"),
        ),
        ("game.kwargs.length=2", "game.kwargs: tests.toy_game:make_line_walk: length must be at least 3, got 2"),
        ("game.id=no_such_module:make", "game.id: cannot import the game module 'no_such_module'"),
        ("game.kwargs.noop_max=-1", "game.kwargs.noop_max: expected a value >= 0, got -1"),
    ],
)
def test_bad_game_settings_exit_2_with_one_line(tmp_path, override, fragment):
    config = TOY if "noop_max" not in override else str(ROOT / "configs" / "atari" / "tiny.yaml")
    result = muzero_command("train", "--config", config, "--set", override, "--logdir", str(tmp_path / "run"))
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], lines
    assert not (tmp_path / "run").exists()


# The names DeepMind's pseudocode defines that this package implements under the same name
# (read off the pseudocode, revision 2, by hand; its `Action` and `Player` are ints here, its
# `visit_softmax_temperature_fn` a method of MuZeroConfig, its `run_selfplay` the self-play
# sources of muzero/runner.py, its `muzero` and `launch_job` the builder and the CLI).
# docs/pseudocode.md says that each is importable from `muzero`.
PSEUDOCODE_NAMES = (
    "MuZeroConfig", "KnownBounds", "MinMaxStats", "Node", "ActionHistory", "Environment", "Game",
    "ReplayBuffer", "NetworkOutput", "Network", "SharedStorage", "make_uniform_network",
    "play_game", "run_mcts", "select_action", "select_child", "ucb_score", "expand_node",
    "backpropagate", "add_exploration_noise", "softmax_sample", "train_network",
    "update_weights", "scale_gradient", "scalar_loss",
)  # fmt: skip


@pytest.mark.parametrize("name", PSEUDOCODE_NAMES)
def test_pseudocode_names_import_from_the_package(name):
    import muzero

    assert name in muzero.__all__
    assert getattr(muzero, name).__name__ == name
