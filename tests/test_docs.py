"""Every ```python block of the docs runs, in order, in one namespace per page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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
