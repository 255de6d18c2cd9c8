"""Every ```python block of the docs runs, in order, in one namespace per page."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import load_script

DOCS = Path(__file__).resolve().parents[1] / "docs"


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.DOTALL)


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_code_blocks_run(page, capsys):
    blocks = python_blocks(page)
    namespace: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{page.name}[block {i}]", "exec"), namespace)  # noqa: S102


def test_gradient_scaling_page_has_its_snippets():
    # The page shows the definition, the clip contrast and the custom_gradient twin.
    blocks = "\n".join(python_blocks(DOCS / "gradient_scaling.md"))
    assert "def scale_gradient(" in blocks and "tf.clip_by_norm" in blocks and "tf.custom_gradient" in blocks


def test_the_config_reference_is_generated_from_the_code():
    # docs/config.md is what scripts/config_reference.py prints from muzero/config.py's fields
    # and their comments; a field added or changed without regenerating the page fails here.
    page = load_script("config_reference").render()
    assert page == (DOCS / "config.md").read_text(), (
        "docs/config.md is stale: run `make config-docs` (python scripts/config_reference.py)"
    )


def test_the_config_reference_lists_every_key_with_its_comment():
    # Every field of every section appears once, as `section.key`; a field's comment is its meaning.
    import dataclasses

    from muzero.config import MuZeroConfig

    page = (DOCS / "config.md").read_text()
    for section in dataclasses.fields(MuZeroConfig):
        for key in dataclasses.fields(section.type if not isinstance(section.type, str) else section.default):
            assert f"| `{section.name}.{key.name}` |" in page, f"{section.name}.{key.name}"
    # Worked by hand from muzero/config.py: train.td_steps, default 10, at least 1, with its comment.
    assert "| `train.td_steps` | `int` | `10` | >= 1 | n of the n-step value target" in page


def test_the_site_builds_strictly(tmp_path):
    # `make docs`: a broken link or a page missing from the nav fails the build.
    pytest.importorskip("mkdocs", reason="the docs extra (mkdocs) is not installed")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        check=False,
        cwd=DOCS.parent,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "site" / "config" / "index.html").is_file()


def test_the_readme_is_one_screen_and_links_only_to_pages_that_exist():
    readme = (DOCS.parent / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    for target in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (DOCS.parent / target).is_file(), target
