"""Every third-party package the framework imports is declared in pyproject.toml.

Walks the framework's modules with `ast` (nothing is imported) and maps each top-level import to
the distribution installed for it. Framework code must find it in the dependencies or an extra;
an import only the type checker reads (`if TYPE_CHECKING:`) may come from the dev group. Model-side
libraries (the mypy override that names them: torch, transformers, ...) run only in a generated
package's environment, and a gate helper's sibling scripts are files, not packages.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
FRAMEWORK = [*PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"], "scripts"]
NOT_HERE = {m.split(".")[0] for o in PYPROJECT["tool"]["mypy"]["overrides"] for m in o["module"]}
RUNTIME = "ab_runtime"  # ships into every generated package: its imports are the package's (package/ spec)


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0]).lower()


def _imports(nodes: Iterable[ast.AST], typing_only: bool = False) -> Iterator[tuple[str, bool]]:
    """(top-level module, only under `if TYPE_CHECKING:`) of every absolute import in `nodes`."""
    for node in nodes:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            yield from _imports(node.body, True)
            yield from _imports(node.orelse, typing_only)
        elif isinstance(node, ast.Import):
            yield from ((alias.name.split(".")[0], typing_only) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0], typing_only
        else:
            yield from _imports(ast.iter_child_nodes(node), typing_only)


def undeclared() -> list[str]:
    project = PYPROJECT["project"]
    runtime = {_name(r) for r in project["dependencies"]}
    runtime |= {_name(r) for extra in project["optional-dependencies"].values() for r in extra}
    dev = {_name(r) for r in PYPROJECT["dependency-groups"]["dev"] if isinstance(r, str)}
    distributions = importlib.metadata.packages_distributions()
    first_party = set(FRAMEWORK) | {"tests", "bench"}
    problems = []
    for package in (p for p in FRAMEWORK if p != RUNTIME):
        for path in sorted((REPO / package).rglob("*.py")):
            for module, typing_only in set(_imports([ast.parse(path.read_text(), str(path))])):
                if module in sys.stdlib_module_names or module in first_party or module in NOT_HERE:
                    continue
                names = {_name(d) for d in distributions.get(module, [module])}
                if not names & (runtime | dev if typing_only else runtime):
                    problems.append(f"{path.relative_to(REPO)}: {module} ({', '.join(sorted(names))})")
    return problems


def test_every_framework_import_is_declared() -> None:
    assert undeclared() == []


def test_the_check_sees_an_undeclared_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy was imported (business_benchmark/metrics.py) and declared nowhere; typing_extensions is
    read by the type checker alone, so the dev group is enough for it."""
    project = {
        **PYPROJECT["project"],
        "dependencies": [r for r in PYPROJECT["project"]["dependencies"] if _name(r) != "numpy"],
    }
    monkeypatch.setitem(PYPROJECT, "project", project)
    assert undeclared() == ["business_benchmark/metrics.py: numpy (numpy)"]
