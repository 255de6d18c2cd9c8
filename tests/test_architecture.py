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
