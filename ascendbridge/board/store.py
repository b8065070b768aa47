"""The board store: the only code that reads or writes the board's SQL.

`BoardStore` is composed of one part per job, each in its own module over a shared base
(ascendbridge/board/base.py): the lease protocol the scheduler uses (leases.py, with its narrow
`LeaseBoard` interface), human steering and guidance (steering.py), agents (agents.py), model
registration (registry.py), reporting/export (reporting.py) and host acceptance (acceptance.py). Callers import BoardStore and
the error classes from here or from `ascendbridge.board`.
"""

from __future__ import annotations

from ascendbridge.board.acceptance import AcceptanceStore
from ascendbridge.board.agents import AgentStore
from ascendbridge.board.base import METADATA_FIELDS, InvalidRegistrationError, StaleTokenError, UnknownModelError
from ascendbridge.board.connection import BoardError
from ascendbridge.board.leases import LeaseBoard, LeaseStore
from ascendbridge.board.records import Registration
from ascendbridge.board.registry import MAX_PRIORITY, SOURCES, RegistryStore, validate_registration
from ascendbridge.board.reporting import ReportingStore
from ascendbridge.board.steering import GUIDANCE_STATES, SteeringStore


class BoardStore(LeaseStore, SteeringStore, AgentStore, RegistryStore, ReportingStore, AcceptanceStore):
    """Typed operations on one board file. Create one per process (engines are not fork-safe)."""


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
