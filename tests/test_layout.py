"""The layout holds: one room per stage, the kernel below the stages, no import cycle.

Walks every module of the shipped packages with `ast` (nothing is imported) and fails on: an
import between two stage packages (the stages are the `ascendbridge.stages` entry points of
pyproject.toml); the kernel (`ascendbridge`, `ab_runtime`) importing a stage package; `ab_runtime`
(which ships inside every generated package) importing the framework; the framework's kernel
importing a part of `ab_runtime` that is not one of its declared standard-library leaves
(`RUNTIME_LEAVES`); the dashboard importing anything but the kernel; a cycle of imports (those
inside functions too: a deferred import only hides a circle), or of the kernel's folders; code
outside `tests/` (the packages, `bench/`, `scripts/`) importing `tests`.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from ascendbridge.stages import STAGES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
KERNEL = ("ascendbridge", "ab_runtime")
# The parts of ab_runtime the framework's kernel may import (docs/architecture.md, "The layout as
# a picture"): standard library only at import time, so the framework (no torch) loads the one copy
# every package ships instead of keeping its own. ascendbridge/gatekit/inner/ runs in a package's
# interpreter and may import any part, inside its functions.
RUNTIME_LEAVES = frozenset(
    f"ab_runtime.{name}"
    for name in (
        "accuracy_standard",
        "calibration",
        "errors",
        "figures",
        "fileops",
        "memory",
        "metrics_file",
        "optimize.notes_file",
        "ops.standard",
        "pairstats",
        "phases",
        "progress",
        "result",
        "sizing",
        "spec",
        "tools",
        "train.corpus",
        "workload_figures",
    )
)
IN_PACKAGE_INTERPRETER = "ascendbridge.gatekit.inner"
# Folder cycles of the kernel a change in flight removes, as (folder, folder it imports): such an
# edge is left out of the cycle check until the change lands, then taken out of here. Empty:
# workers -> teamlead went when the stage registry moved to ascendbridge/stage_registry.py.
_CYCLES_BEING_REMOVED: set[tuple[str, str]] = set()
# Code that is not a test: the shipped packages and these folders.
NOT_TESTS = ("bench", "scripts")


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def stage_packages() -> set[str]:
    """Top-level package of each stage entry point (`discovery.stage:DISCOVERY_STAGE` -> discovery)."""
    targets = _pyproject()["project"]["entry-points"]["ascendbridge.stages"].values()
    return {target.partition(":")[0].split(".")[0] for target in targets}


def shipped_packages() -> list[str]:
    return list(_pyproject()["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"])


@cache
def modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the shipped packages."""
    found: dict[str, Path] = {}
    for package in shipped_packages():
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_package(name: str) -> bool:
    return modules()[name].name == "__init__.py"


def _resolve(current: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = current.split(".")
    base = base[: len(base) - node.level + (1 if _is_package(current) else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def _module_of(name: str) -> str | None:
    """The longest known module that `name` is or lies in (None: not ours, e.g. torch)."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in modules():
            return ".".join(parts)
        parts.pop()
    return None


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _walk(node: ast.AST, top: bool) -> Iterator[tuple[ast.AST, bool]]:
    """Every import under `node` with whether it runs at import time (not in a function body)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, top
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from _walk(child, False)
        else:
            yield from _walk(child, top and not _type_checking(child))


@cache
def imports(name: str) -> tuple[tuple[str, int, bool], ...]:
    """(imported module, line, at import time) for each of our modules that `name` imports."""
    tree = ast.parse(modules()[name].read_text(), str(modules()[name]))
    found: list[tuple[str, int, bool]] = []
    for node, top in _walk(tree, True):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            assert isinstance(node, ast.ImportFrom)
            source = _resolve(name, node)
            targets = [f"{source}.{alias.name}" for alias in node.names] or [source]
        for target in targets:
            module = _module_of(target)
            if module is not None and module != name:
                found.append((module, node.lineno, top))
    return tuple(found)


def _top(name: str) -> str:
    return name.split(".")[0]


def edges_between_packages() -> Iterator[tuple[str, str, int, str]]:
    """(importing module, its package, line, imported module) for every import across packages."""
    for name in modules():
        for target, line, _ in imports(name):
            if _top(target) != _top(name):
                yield name, _top(name), line, target


def _where(name: str, line: int, target: str) -> str:
    return f"{modules()[name].relative_to(REPO)}:{line} imports {target}"


def test_the_stage_packages_are_the_entry_points_and_all_ship() -> None:
    stages = stage_packages()
    assert stages == set(STAGES)  # one package per stage of the vocabulary
    assert stages <= set(shipped_packages()) and set(KERNEL) <= set(shipped_packages())


def test_no_stage_package_imports_another() -> None:
    stages = stage_packages()
    bad = [_where(n, line, t) for n, pkg, line, t in edges_between_packages() if pkg in stages and _top(t) in stages]
    assert not bad, "stage packages import each other:\n" + "\n".join(bad)


def test_the_kernel_imports_no_stage_package() -> None:
    stages = stage_packages()
    bad = [_where(n, line, t) for n, pkg, line, t in edges_between_packages() if pkg in KERNEL and _top(t) in stages]
    assert not bad, "the kernel imports a stage package:\n" + "\n".join(bad)


def test_the_runtime_never_imports_the_framework() -> None:
    bad = [_where(n, line, t) for n, pkg, line, t in edges_between_packages() if pkg == "ab_runtime"]
    assert not bad, "ab_runtime (shipped in every package) imports the framework:\n" + "\n".join(bad)


def test_the_kernel_imports_only_the_declared_runtime_leaves() -> None:
    bad = [
        _where(n, line, t)
        for n, pkg, line, t in edges_between_packages()
        if pkg == "ascendbridge"
        and _top(t) == "ab_runtime"
        and t not in RUNTIME_LEAVES
        and not n.startswith(IN_PACKAGE_INTERPRETER + ".")
    ]
    assert not bad, "the kernel imports a part of ab_runtime that is not a declared leaf:\n" + "\n".join(bad)


def _stdlib_only_at_import(name: str) -> list[str]:
    """What `name` imports when loaded, other than the standard library and the declared leaves."""
    tree = ast.parse(modules()[name].read_text())
    found = []
    for node, top in _walk(tree, True):
        if not top:
            continue
        if isinstance(node, ast.ImportFrom) and node.level:
            targets = [_module_of(f"{_resolve(name, node)}.{a.name}") or _resolve(name, node) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            targets = [node.module or ""]
        else:
            assert isinstance(node, ast.Import)
            targets = [alias.name for alias in node.names]
        for target in targets:
            root = target.split(".")[0]
            ours = _module_of(target)
            if ours is not None and (ours in RUNTIME_LEAVES or _is_package(ours)):
                continue
            if ours is None and (root in sys.stdlib_module_names or root == "__future__"):
                continue
            found.append(f"{modules()[name].relative_to(REPO)}:{node.lineno} imports {target}")
    return found


def test_the_declared_runtime_leaves_need_only_the_standard_library() -> None:
    assert RUNTIME_LEAVES <= set(modules()), sorted(RUNTIME_LEAVES - set(modules()))
    bad = [line for leaf in sorted(RUNTIME_LEAVES) for line in _stdlib_only_at_import(leaf)]
    assert not bad, "a declared ab_runtime leaf needs more than the standard library when imported:\n" + "\n".join(bad)


def test_no_code_outside_tests_imports_tests() -> None:
    bad = []
    for path in sorted(p for folder in (*shipped_packages(), *NOT_TESTS) for p in (REPO / folder).rglob("*.py")):
        for node, _ in _walk(ast.parse(path.read_text(), str(path)), True):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [getattr(node, "module", "")]
            if getattr(node, "level", 0) == 0 and any((n or "").split(".")[0] == "tests" for n in names):
                bad.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not bad, "code outside tests/ imports tests (move what it needs to bench/support/):\n" + "\n".join(bad)


def test_the_dashboard_imports_only_the_kernel() -> None:
    bad = [
        _where(n, line, t)
        for n, pkg, line, t in edges_between_packages()
        if pkg == "dashboard" and _top(t) not in KERNEL
    ]
    assert not bad, "the dashboard imports beyond the kernel:\n" + "\n".join(bad)


def test_the_workers_folder_does_not_import_the_team_lead() -> None:
    """Workers and executors find stages through ascendbridge/stage_registry.py, never teamlead/."""
    bad = [
        _where(name, line, target)
        for name in modules()
        if name.startswith("ascendbridge.workers")
        for target, line, _ in imports(name)
        if target.startswith("ascendbridge.teamlead")
    ]
    assert not bad, "ascendbridge/workers imports ascendbridge/teamlead:\n" + "\n".join(bad)


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of `graph` as [a, b, ..., a], or [] when it has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return []

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return []


def test_imports_form_no_cycle() -> None:
    graph = {name: {t for t, _, _top in imports(name)} for name in modules()}
    cycle = find_cycle(graph)
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def _folder(name: str) -> str | None:
    """The kernel folder (or top-level module) a module of `ascendbridge` belongs to: ascendbridge.<x>."""
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "ascendbridge" and len(parts) > 1 else None


def folder_graph() -> dict[str, set[str]]:
    """ascendbridge.<folder> -> the kernel folders its modules import, less the edges being removed."""
    graph: dict[str, set[str]] = {}
    for name in modules():
        source = _folder(name)
        if source is None:
            continue
        for target, _, _ in imports(name):
            folder = _folder(target)
            if folder is not None and folder != source and (source, folder) not in _CYCLES_BEING_REMOVED:
                graph.setdefault(source, set()).add(folder)
    return graph


def test_the_kernels_folders_form_no_cycle() -> None:
    cycle = find_cycle(folder_graph())
    assert not cycle, "the kernel's folders import each other in a circle: " + " -> ".join(cycle)
    for source, target in _CYCLES_BEING_REMOVED:  # still there: a merged fix empties the set
        assert target in {_folder(t) for n in modules() if _folder(n) == source for t, _, _ in imports(n)}


def test_the_checks_see_a_violation() -> None:
    """The walk resolves relative and from-imports to modules, and the cycle finder finds one."""
    assert any(t == "ascendbridge.package.spec" for t, _, _ in imports("ascendbridge.package.generator"))
    assert any(t == "ab_runtime.errors" for t, _, _ in imports("ab_runtime.optimize.confirm"))  # `from ..errors`
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []
    assert "ascendbridge.workers" in folder_graph()["ascendbridge.teamlead"]  # folders are nodes
    assert find_cycle({"ascendbridge.a": {"ascendbridge.b"}, "ascendbridge.b": {"ascendbridge.a"}})
    assert _stdlib_only_at_import("ab_runtime.harness")  # a part that needs torch is seen as one
