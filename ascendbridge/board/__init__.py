"""The board: SQLite schema, migrations and the store (the only code that writes SQL)."""

from ascendbridge.board.connection import (
    BoardBusyError,
    BoardCorruptError,
    BoardError,
    BoardFullError,
    BoardMissingError,
    BoardReadOnlyError,
)
from ascendbridge.board.records import (
    AgentRecord,
    AttemptEnd,
    AttemptRecord,
    AttemptStart,
    EventRecord,
    GuidanceRecord,
    MetricRecord,
    ModelRecord,
    NewEvent,
    Registration,
    TaskRecord,
)
from ascendbridge.board.store import (
    BoardStore,
    InvalidRegistrationError,
    StaleTokenError,
    UnknownModelError,
    validate_registration,
)

__all__ = [
    "AgentRecord",
    "AttemptEnd",
    "AttemptRecord",
    "AttemptStart",
    "BoardBusyError",
    "BoardCorruptError",
    "BoardError",
    "BoardFullError",
    "BoardMissingError",
    "BoardReadOnlyError",
    "BoardStore",
    "EventRecord",
    "GuidanceRecord",
    "InvalidRegistrationError",
    "MetricRecord",
    "ModelRecord",
    "NewEvent",
    "Registration",
    "StaleTokenError",
    "TaskRecord",
    "UnknownModelError",
    "validate_registration",
]
