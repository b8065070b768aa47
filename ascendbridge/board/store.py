"""The board store: the only code that reads or writes the board's SQL.

`BoardStore` is composed of one part per job, each in its own module over a shared base
(ascendbridge/board/base.py): the lease protocol the scheduler uses (leases.py, with its narrow
`LeaseBoard` interface), human steering and guidance (steering.py), agents (agents.py), model
registration (registry.py) and reporting (reporting.py); `export` reads them all. Callers import BoardStore and
the error classes from here or from `ascendbridge.board`.
"""

from __future__ import annotations

from typing import Any, Optional

from sqlalchemy import func
from sqlmodel import select

from ascendbridge.board.agents import AgentStore
from ascendbridge.board.base import METADATA_FIELDS, InvalidRegistrationError, StaleTokenError, UnknownModelError
from ascendbridge.board.connection import BoardError
from ascendbridge.board.leases import LeaseBoard, LeaseStore
from ascendbridge.board.records import Registration
from ascendbridge.board.registry import MAX_PRIORITY, SOURCES, RegistryStore, validate_registration
from ascendbridge.board.reporting import ReportingStore
from ascendbridge.board.schema import Event
from ascendbridge.board.steering import GUIDANCE_STATES, SteeringStore


class BoardStore(LeaseStore, SteeringStore, AgentStore, RegistryStore, ReportingStore):
    """Typed operations on one board file. Create one per process (engines are not fork-safe)."""

    # export reads every part of the board, so it lives on the composed store
    def export(self) -> dict[str, Any]:
        """Everything on the board as plain JSON-able data, read in one transaction (one snapshot:
        writers that commit meanwhile are not half in it)."""
        with self.snapshot(), self._read() as s:
            version = s.exec(select(func.max(Event.id))).first()
            return self._export_rows(version)

    def _export_rows(self, version: Optional[int]) -> dict[str, Any]:
        models = self.list_models()
        return {
            "board": str(self.path),
            "last_event_id": version or 0,
            "models": [m.model_dump() for m in models],
            "tasks": [t.model_dump() for t in self.list_tasks()],
            "attempts": {
                m.model_id: [{"stage": st, **a.model_dump()} for st, a in self.list_attempts(m.model_id)]
                for m in models
            },
            "agents": [a.model_dump() for a in self.list_agents()],
            "host_devices": [d.model_dump() for d in self.list_host_devices()],  # attempts carry host/devices
            "guidance": [g.model_dump() for g in self.list_guidance()],
            "metrics": [x.model_dump() for x in self.list_metrics()],
            "stacks": self.list_stacks(),
            "events": [e.model_dump() for e in self.list_events(limit=10**9)],
        }


__all__ = [
    "BoardStore",
    "BoardError",
    "LeaseBoard",
    "StaleTokenError",
    "UnknownModelError",
    "InvalidRegistrationError",
    "validate_registration",
    "Registration",
    "SOURCES",
    "GUIDANCE_STATES",
    "MAX_PRIORITY",
    "METADATA_FIELDS",
]
