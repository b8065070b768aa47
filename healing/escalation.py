"""The hook where something smarter than the rules can be asked (an LLM agent, a later issue).

When no rule recognises a failure, or the matching rule has no further fix, the loop calls
`escalate`. Escalators are callables `(classification, spec, directory) -> Fix | None`
registered with `register_escalator` (agent_escalation.py installs the memory of past agent
fixes and the healer role's LLM backend when the stage module is imported). With none, or none
answering, the built-in agent ends the stage as failed with its diagnosis. A proposed fix goes
through the same loop and gate as a rule's: agents propose, the program gates.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from ascendbridge.package.spec import AdaptationSpec
from healing.classifier import Classification
from healing.rules import Fix

Escalator = Callable[[Classification, AdaptationSpec, Path], Fix | None]
_ESCALATORS: list[tuple[str, Escalator]] = []


def register_escalator(name: str, escalator: Escalator) -> None:
    """Add an escalator (e.g. an LLM healer backend); asked in registration order."""
    _ESCALATORS.append((name, escalator))


def registered_escalators() -> list[str]:
    return [name for name, _ in _ESCALATORS]


def escalate(classification: Classification, spec: AdaptationSpec, directory: Path) -> tuple[str, Fix] | None:
    """Ask each escalator in turn; the first proposed fix wins, with the escalator's name."""
    for name, escalator in _ESCALATORS:
        try:
            fix = escalator(classification, spec, directory)
        except Exception as exc:  # an agent that crashes is an agent without an answer
            print(f"warning: healing escalator '{name}' failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        if fix is not None:
            return name, fix
    return None
