"""The board: SQLite schema, migrations and the store (the only code that writes SQL)."""

from ascendbridge.board.connection import BoardError, BoardMissingError
from ascendbridge.board.records import (
    AgentRecord,
    AttemptRecord,
    EventRecord,
    GuidanceRecord,
    MetricRecord,
    ModelRecord,
    Registration,
    TaskRecord,
)
from ascendbridge.board.store import BoardStore, StaleTokenError, UnknownModelError

__all__ = [
    "AgentRecord", "AttemptRecord", "BoardError", "BoardMissingError", "BoardStore",
    "EventRecord", "GuidanceRecord", "MetricRecord", "ModelRecord", "Registration",
    "StaleTokenError", "TaskRecord", "UnknownModelError",
]
