"""The entry points (API, admin UI, CLI) call the service facade only: none of their modules
reaches through it to the Hub or the store. (`lint-imports` checks the import layers.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tidings

SOURCE = Path(tidings.__file__).parent
ENTRY_POINTS = sorted(
    path for name in ("api", "web", "cli") for path in (SOURCE / name).glob("*.py")
)
FORBIDDEN_ATTRIBUTES = {"hub", "store", "registry"}


@pytest.mark.parametrize("path", ENTRY_POINTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_entry_points_never_reach_past_the_service(path: Path) -> None:
    tree = ast.parse(path.read_text())
    reached = [
        f"line {node.lineno}: .{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRIBUTES
    ]
    imported = [
        f"line {node.lineno}: {node.module}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith(
            ("tidings.store", "tidings.channels", "tidings.dispatch")
        )
    ]
    assert reached + imported == []
