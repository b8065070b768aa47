"""The board as a stage may see it: a narrow read interface over a read-only SQLite connection.

Stages never write the board (the team lead records what they propose). The few that read it
(agent history: the budget spent and the fixes remembered; the benchmark: the last environment
probe) get a `BoardReader`, opened with SQLite's `mode=ro`, so a stage cannot write even by
mistake, and a host without the board (a Ray node) simply has none.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

from sqlalchemy import create_engine
from sqlmodel import Session

from ascendbridge.board.acceptance import AcceptanceStore
from ascendbridge.board.connection import BoardError, busy_timeout_ms
from ascendbridge.board.records import EventRecord, HostAcceptanceRecord, ModelRecord
from ascendbridge.board.registry import RegistryStore
from ascendbridge.board.reporting import ReportingStore


class BoardReader(Protocol):
    """What a stage may read: a model's record, the events (agent runs, environment probes) and the
    hosts' acceptance records (the training preflight's cache)."""

    path: Path

    def get_model(self, model_id: str) -> ModelRecord: ...

    def latest_event(self, kind: str) -> EventRecord | None: ...

    def events_of_kind(self, kind: str, model_id: str | None = None, limit: int = 1000) -> list[EventRecord]: ...

    def host_acceptances(self, host: str | None = None) -> list[HostAcceptanceRecord]: ...

    def close(self) -> None: ...


class ReadOnlyBoard(RegistryStore, ReportingStore, AcceptanceStore):
    """BoardReader over `mode=ro`: no write engine at all; a write attempt is a BoardError."""

    def __init__(self, path: str | os.PathLike[str]) -> None:  # no StoreBase.__init__: it opens for writing
        self.path = Path(path)
        timeout_s = busy_timeout_ms() / 1000
        url = f"sqlite:///file:{quote(str(self.path.resolve()))}?mode=ro&uri=true"
        self._read_engine = create_engine(url, connect_args={"timeout": timeout_s})

    def close(self) -> None:
        self._read_engine.dispose()

    @contextmanager
    def _write(self) -> Iterator[Session]:
        raise BoardError(f"board {self.path} is open read-only here: stages never write the board")
        yield  # pragma: no cover (a generator, so the signature matches StoreBase._write)


def open_reader(path: Path | None) -> BoardReader | None:
    """The board at `path` for reading, or None when there is none here (no path, no file, not a board)."""
    if path is None or not Path(path).is_file():
        return None
    reader = ReadOnlyBoard(path)
    try:
        reader.latest_event("schema_check")  # a file that is not a readable board is no board
    except Exception:  # any failure here means: nothing to read
        reader.close()
        return None
    return reader
