"""Which code implements each stage: entry points, ASCENDBRIDGE_EXTRA_STAGES, register_stage.

The team lead never imports a stage: it only checks that the stage's module can be found, so a
stage whose module crashes on import fails inside a worker (a failed attempt with a traceback)
instead of taking the scheduler down, and model code never loads into the team lead.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from ascendbridge.stage_table import ENTRY_POINT_GROUP, stage_table
from ascendbridge.stages import STAGES, check_stage

EXTRA_STAGES_ENV = "ASCENDBRIDGE_EXTRA_STAGES"

# Agent role of the worker that runs each stage (its stage.toml's `role`; docs/agents.md).
STAGE_ROLES: dict[str, str] = {row.name: row.role for row in stage_table()}


class StageLoadError(Exception):
    """A stage has no implementation that can be loaded."""


@dataclass(frozen=True)
class StageRef:
    """Where a stage's implementation lives: `module:attr`, and who declared it."""

    name: str
    target: str
    source: str  # entry-point | env | register

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    @property
    def attr(self) -> str:
        return self.target.partition(":")[2]


_registered: dict[str, StageRef] = {}


def _check_target(name: str, target: str) -> str:
    check_stage(name)
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"stage '{name}': target '{target}' is not 'module:attribute'")
    return target


def register_stage(name: str, target: str) -> StageRef:
    """Programmatic registration (tests, plugins); wins over env and entry points."""
    ref = StageRef(name, _check_target(name, target), "register")
    _registered[name] = ref
    return ref


def unregister_stage(name: str) -> None:
    _registered.pop(name, None)


def parse_extra_stages(raw: str) -> dict[str, StageRef]:
    """`name=module:attr,name=module:attr` -> refs; raises ValueError on a malformed item."""
    refs: dict[str, StageRef] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        name, sep, target = item.partition("=")
        if not sep:
            raise ValueError(f"{EXTRA_STAGES_ENV}: '{item}' is not 'stage=module:attribute'")
        refs[name.strip()] = StageRef(name.strip(), _check_target(name.strip(), target.strip()), "env")
    return refs


def stage_refs(environ: dict[str, str] | None = None) -> dict[str, StageRef]:
    """All declared stages: entry points, overridden by the env var, overridden by register_stage."""
    env = os.environ if environ is None else environ
    refs: dict[str, StageRef] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in STAGES:
            refs[ep.name] = StageRef(ep.name, ep.value.replace(" ", ""), "entry-point")
    refs.update(parse_extra_stages(env.get(EXTRA_STAGES_ENV, "")))
    refs.update(_registered)
    return refs


def entry_point_stage(name: str) -> Any:
    """The stage the installed packages declare for `name` (entry points only, never an override),
    loaded: for a stage that runs others in its slot (re-validation fills `benchmark` on its board)."""
    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not found:
        raise StageLoadError(f"no entry point for stage '{name}' (group {ENTRY_POINT_GROUP})")
    return load_stage(StageRef(name, found[0].value.replace(" ", ""), "entry-point"))


def extra_stages_env(refs: dict[str, StageRef]) -> str:
    """The env value that makes a worker subprocess see the same non-entry-point stages."""
    return ",".join(f"{r.name}={r.target}" for r in refs.values() if r.source != "entry-point")


def check_loadable(ref: StageRef | None, name: str) -> str | None:
    """None when the stage's module exists; otherwise why the stage cannot run (one line)."""
    if ref is None:
        return f"no implementation registered for stage '{name}' (entry point group {ENTRY_POINT_GROUP})"
    try:
        spec = importlib.util.find_spec(ref.module)
    except Exception as exc:  # a parent package that fails to import
        return f"{ref.target}: {type(exc).__name__}: {exc}"
    if spec is None:
        return f"{ref.target}: no module named '{ref.module}'"
    return None


def load_stage(ref: StageRef) -> Any:
    """Import the stage object (only ever called inside a worker or the bench's in-process executor)."""
    module = importlib.import_module(ref.module)
    try:
        obj = getattr(module, ref.attr)
    except AttributeError as exc:
        raise StageLoadError(f"{ref.target}: module has no attribute '{ref.attr}'") from exc
    for method in ("run", "gate"):
        if not callable(getattr(obj, method, None)):
            raise StageLoadError(f"{ref.target}: stage object has no {method}() method")
    return obj
