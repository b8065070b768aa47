"""Units that fit in a head: no function over 100 lines, no class over 300, in the kernel or a stage.

Walks the kernel (`ascendbridge`, `ab_runtime`) and every stage package (the `ascendbridge.stages`
entry points) with `ast`, nothing imported. A long unit is split where the split has a name (a phase,
a case, a part), not cut at an arbitrary line. The few units still over the limits are listed below
with their size today: a ceiling each may only come down to, never up to (a new long unit fails).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
KERNEL = ("ascendbridge", "ab_runtime")
FUNCTION_LINES = 100
CLASS_LINES = 300
# Known long units, "path:qualified name" -> their lines today. Split one, then lower or drop its row.
CEILINGS = {"ascendbridge/board/queries.py:BoardQueries": 334}


def _packages() -> list[str]:
    stages = {ep.value.partition(":")[0].split(".")[0] for ep in entry_points(group="ascendbridge.stages")}
    return [*KERNEL, *sorted(stages)]


def _units(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.AST, int]]:
    """Every function and class, with its dotted name and its lines (decorators and docstring included)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{node.name}"
            assert node.end_lineno is not None
            yield name, node, node.end_lineno - node.lineno + 1
            yield from _units(node, f"{name}.")
        else:
            yield from _units(node, prefix)


def long_units() -> dict[str, int]:
    """Each unit over its limit, "path:name" -> lines."""
    found = {}
    for package in _packages():
        for path in sorted((REPO / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for name, node, lines in _units(tree):
                limit = CLASS_LINES if isinstance(node, ast.ClassDef) else FUNCTION_LINES
                if lines > limit:
                    found[f"{path.relative_to(REPO).as_posix()}:{name}"] = lines
    return found


def test_no_unit_grows_past_its_limit() -> None:
    found = long_units()
    over = {unit: lines for unit, lines in found.items() if unit not in CEILINGS}
    grown = {unit: lines for unit, lines in found.items() if unit in CEILINGS and lines > CEILINGS[unit]}
    assert not over, f"split these where the split has a name (limits {FUNCTION_LINES}/{CLASS_LINES} lines): {over}"
    assert not grown, f"these long units grew past their ceiling in CEILINGS: {grown}"


def test_every_ceiling_is_still_needed() -> None:
    """A ceiling outlives its unit only by mistake: once split (or shorter), its row goes or comes down."""
    found = long_units()
    stale = {unit: (ceiling, found.get(unit)) for unit, ceiling in CEILINGS.items() if found.get(unit) != ceiling}
    assert not stale, f"lower or drop these CEILINGS rows (ceiling, lines now): {stale}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f():\n" + "    x = 1\n" * 100, {"f": 101}),
        ("class C:\n    def m(self):\n" + "        x = 1\n" * 100, {"C.m": 101}),
        ("def f():\n" + "    x = 1\n" * 99, {}),
    ],
    ids=["top-level", "method", "at-the-limit"],
)
def test_the_walk_finds_a_long_function_at_any_depth(source: str, expected: dict[str, int]) -> None:
    tree = ast.parse(source)
    found = {
        name: lines
        for name, node, lines in _units(tree)
        if not isinstance(node, ast.ClassDef) and lines > FUNCTION_LINES
    }
    assert found == expected
