"""The hook where something smarter than the rules can be asked (an LLM agent, a later issue).

When no rule recognises a failure, or the matching rule has no further fix, the loop calls
`escalate`. Escalators are callables `(classification, spec, directory) -> Fix | None`, either
registered in-process with `register_escalator` or declared as entry points in the
`ascendbridge.healing_escalators` group (loaded once, by name order, so the worker process that
runs the stage finds them without importing anything by hand). None ships with the healer, so
the built-in agent ends the stage as failed with its diagnosis. A proposed fix goes through the
same loop and gate as a rule's: agents propose, the program gates.
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Callable, Optional

from adaptation.healing.classifier import Classification
from adaptation.healing.rules import Fix
from adaptation.spec import AdaptationSpec

ENTRY_POINT_GROUP = "ascendbridge.healing_escalators"
Escalator = Callable[[Classification, AdaptationSpec, Path], Optional[Fix]]
_ESCALATORS: list[tuple[str, Escalator]] = []
_entry_points_loaded = False


def register_escalator(name: str, escalator: Escalator) -> None:
    """Add an escalator (e.g. an LLM healer backend); asked in registration order."""
    _ESCALATORS.append((name, escalator))


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        try:
            register_escalator(point.name, point.load())
        except Exception as exc:  # a broken plug-in must not take the healer down
            print(f"warning: healing escalator '{point.name}' failed to load: {exc}", file=sys.stderr)


def registered_escalators() -> list[str]:
    _load_entry_points()
    return [name for name, _ in _ESCALATORS]


def escalate(classification: Classification, spec: AdaptationSpec, directory: Path) -> Optional[tuple[str, Fix]]:
    """Ask each escalator in turn; the first proposed fix wins, with the escalator's name."""
    _load_entry_points()
    for name, escalator in _ESCALATORS:
        try:
            fix = escalator(classification, spec, directory)
        except Exception as exc:  # an agent that crashes is an agent without an answer
            print(f"warning: healing escalator '{name}' failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        if fix is not None:
            return name, fix
    return None
