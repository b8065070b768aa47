"""The hook where something smarter than the rules can be asked (an LLM agent, a later issue).

When no rule recognises a failure, or the matching rule has no further fix, the loop calls
`escalate`. Escalators are registered callables that may propose a spec fix; none is registered
by default, so the built-in agent ends the stage as failed with its machine-readable diagnosis.
An escalator's proposal goes through the same loop and gate as a rule's: agents propose, the
program gates.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from adaptation.healing.classifier import Classification
from adaptation.healing.rules import Fix
from adaptation.spec import AdaptationSpec

Escalator = Callable[[Classification, AdaptationSpec, Path], Optional[Fix]]
_ESCALATORS: list[tuple[str, Escalator]] = []


def register_escalator(name: str, escalator: Escalator) -> None:
    """Add an escalator (e.g. an LLM healer backend); asked in registration order."""
    _ESCALATORS.append((name, escalator))


def registered_escalators() -> list[str]:
    return [name for name, _ in _ESCALATORS]


def escalate(classification: Classification, spec: AdaptationSpec, directory: Path) -> Optional[tuple[str, Fix]]:
    """Ask each escalator in turn; the first proposed fix wins, with the escalator's name."""
    for name, escalator in _ESCALATORS:
        fix = escalator(classification, spec, directory)
        if fix is not None:
            return name, fix
    return None
