"""The events a stage records in its worker process (an agent's run, a reuse of a remembered fix)
until the worker puts them in the stage's outcome, which the team lead writes with the attempt.

A module of its own, below both of its users: `ascendbridge/agents/` records into it and
`ascendbridge/workers/worker.py` takes from it, so neither folder imports the other.
"""

from __future__ import annotations

from ascendbridge.stage_api import AgentEvent

_pending: list[AgentEvent] = []  # this process's events, until the worker takes them


def record(event: AgentEvent) -> None:
    _pending.append(event)


def recorded() -> list[AgentEvent]:
    """The events recorded so far and not yet taken, oldest first (an agent's budget counts them)."""
    return list(_pending)


def take_events() -> list[AgentEvent]:
    """The events recorded in this process since the last call (the worker's outcome carries them)."""
    out = list(_pending)
    _pending.clear()
    return out
