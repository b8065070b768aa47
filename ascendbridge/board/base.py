"""The store's base: engines, the write/read sessions, the event helper and the row lookups
that every part of the board store (leases, steering, agents, registry, reporting) shares.

Every state change is one short `BEGIN IMMEDIATE` transaction that also appends its event, so
a process killed at any moment leaves the board either before or after the change, never in
between.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine
from sqlalchemy.exc import DatabaseError, OperationalError
from sqlmodel import Session, col, select

from ascendbridge.board.connection import (
    BoardBusyError,
    BoardError,
    BoardReadOnlyError,
    board_error,
    open_engines,
    open_read_only,
)
from ascendbridge.board.records import dumps, loads, now_iso
from ascendbridge.board.schema import Attempt, Event, Model, Task
from ascendbridge.stages import TRAINING_JOB_STAGES, next_stage


class UnknownModelError(BoardError):
    pass


class InvalidRegistrationError(BoardError, ValueError):
    """A registration request that is wrong in itself (bad id, source, revision, url...)."""


class StaleTokenError(BoardError):
    """The caller no longer owns the task (lease reclaimed or task moved on)."""


_Store = TypeVar("_Store", bound="StoreBase")


class StoreBase:
    """Typed operations on one board file. Create one per process (engines are not fork-safe)."""

    def __init__(self, path: str | os.PathLike[str], create: bool = False, read_only: bool = False) -> None:
        """Open for writing (integrity checked, schema created or upgraded), or with `read_only`
        for reading alone (a board on a read-only file system or a file this user cannot write;
        every write raises BoardReadOnlyError)."""
        self.path = Path(path)
        self.read_only = read_only
        if read_only:
            self._write_engine = self._read_engine = open_read_only(self.path)
        else:
            self._write_engine, self._read_engine = open_engines(self.path, create=create)

    @classmethod
    def init(cls: type[_Store], path: str | os.PathLike[str]) -> _Store:
        return cls(path, create=True)

    def close(self) -> None:
        self._write_engine.dispose()
        self._read_engine.dispose()

    def __enter__(self: _Store) -> _Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ sessions
    @contextmanager
    def _write(self) -> Iterator[Session]:
        if self.read_only:
            raise BoardReadOnlyError(
                f"board {self.path} is open read-only (the file or its directory is not "
                "writable); this command changes the board"
            )
        with self._transaction(self._write_engine) as session:
            yield session

    @contextmanager
    def _read(self) -> Iterator[Session]:
        snapshot = _SNAPSHOT.get()
        if snapshot is not None and snapshot[0] is self:  # inside snapshot(): one shared transaction
            yield snapshot[1]
            return
        with self._transaction(self._read_engine) as session:
            yield session

    @contextmanager
    def _transaction(self, engine: Engine) -> Iterator[Session]:
        """One transaction on `engine`; a locked or failing board becomes a one-line BoardError."""
        with _busy_as_board_error(self.path):
            with Session(engine, expire_on_commit=False) as session:
                with session.begin():
                    yield session

    def _row(self, session: Session, table: Any, pk: int, what: str) -> Any:
        """The row `pk` of `table`, or BoardError("unknown WHAT #pk")."""
        row = session.get(table, pk)
        if row is None:
            raise BoardError(f"unknown {what} #{pk}")
        return row

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Run several reads in one read transaction, so they see one consistent board (export)."""
        with self._read() as session:
            token = _SNAPSHOT.set((self, session))
            try:
                yield
            finally:
                _SNAPSHOT.reset(token)

    @staticmethod
    def _event(
        session: Session,
        kind: str,
        message: str,
        model_pk: int | None = None,
        stage: str | None = None,
        data: dict[str, Any] | None = None,
        origin: str = "system",
    ) -> None:
        session.add(
            Event(
                model_pk=model_pk,
                stage=stage,
                kind=kind,
                message=message,
                data_json=dumps(data or {}),
                origin=origin,
                ts=now_iso(),
            )
        )

    def _task_event(
        self,
        s: Session,
        task: Task,
        kind: str,
        message: str,
        data: dict[str, Any] | None = None,
        origin: str = "system",
    ) -> None:
        """An event about one task: under its model and stage."""
        self._event(s, kind, message, task.model_pk, task.stage, data, origin)

    @staticmethod
    def _model_row(session: Session, model_id: str) -> Model:
        row = session.exec(select(Model).where(Model.model_id == model_id)).first()
        if row is None:
            raise UnknownModelError(f"unknown model '{model_id}' (see: board_ops.py list_models)")
        return row

    @staticmethod
    def _task_row(session: Session, model_pk: int, stage: str) -> Task:
        row = session.exec(select(Task).where(Task.model_pk == model_pk, Task.stage == stage)).first()
        if row is None:  # every model gets all its stage rows at registration
            raise BoardError(f"board is inconsistent: no {stage} task for model #{model_pk}")
        return row

    # ------------------------------------------------------------------ shared by several parts
    @staticmethod
    def _task_with_model(s: Session, task_id: int) -> tuple[Task, Model]:
        """A task and its model, or BoardError for an unknown task id."""
        row = s.exec(
            select(Task, Model).join(Model, col(Task.model_pk) == col(Model.id)).where(Task.id == task_id)
        ).first()
        if row is None:
            raise BoardError(f"unknown task #{task_id}")
        return row[0], row[1]

    def _back_to_pending(
        self, s: Session, task: Task, now: str, detail: str, data: dict[str, Any], origin: str
    ) -> None:
        """A task whose owner is gone (lease expired, owner stale) returns to pending, with its event."""
        task.status = "pending"
        task.owner = None
        task.lease_expires_at = None
        task.updated_at = now
        s.add(task)
        self._task_event(s, task, "lease_expired", f"{task.stage}: {detail}, back to pending", data, origin)

    def _owned(self, s: Session, task_id: int, token: int) -> Task:
        task = s.get(Task, task_id)
        if task is None:
            raise BoardError(f"unknown task #{task_id}")
        if task.status != "in_progress" or task.fencing_token != token:
            raise StaleTokenError(
                f"task #{task_id}: fencing token {token} is stale "
                f"(task is {task.status}, current token {task.fencing_token})"
            )
        return task

    def _set_metadata(
        self,
        s: Session,
        row: Model,
        fields: dict[str, Any],
        metadata: dict[str, Any] | None,
        origin: str,
        stage: str | None = None,
    ) -> None:
        """Store discovered metadata; its event names the stage that brought it (None: outside any)."""
        bad = set(fields) - METADATA_FIELDS
        if bad:
            raise BoardError(f"cannot set model fields: {', '.join(sorted(bad))}")
        for key, value in fields.items():
            setattr(row, key, value)
        if metadata is not None:
            row.metadata_json = dumps(metadata)
        s.add(row)
        self._event(
            s, "metadata", "discovered metadata stored", row.id, stage, {k: v for k, v in fields.items()}, origin
        )

    def _advance(self, s: Session, model_pk: int, done_stage: str) -> None:
        """Make the stage after `done_stage` pending, skipping stages the model's policy skips and
        passing over stages already skipped (a stage skipped before its predecessor finished)."""
        model = s.get_one(Model, model_pk)
        skip = set(_json_list(model.skip_stages_json))
        stage = next_stage(done_stage)
        while stage is not None:
            task = self._task_row(s, model_pk, stage)
            if task.status == "skipped":
                stage = next_stage(stage)
                continue
            if task.status != "waiting":
                return
            now = now_iso()
            task.updated_at = now
            if stage in skip:
                task.status = "skipped"
                task.finished_at = now
                s.add(task)
                no_job = stage in TRAINING_JOB_STAGES and model.training_json in ("", "{}")
                why = " (no training job registered)" if no_job else ""
                self._event(s, "skipped", f"{stage} skipped by policy{why}", model_pk, stage, {})
                stage = next_stage(stage)
                continue
            task.status = "pending"
            s.add(task)
            self._event(s, "pending", f"{stage} is now pending", model_pk, stage, {})
            return


_SNAPSHOT: ContextVar[tuple[StoreBase, Session] | None] = ContextVar("board_snapshot", default=None)


@contextmanager
def _busy_as_board_error(path: Path) -> Iterator[None]:
    """A lock held past the busy timeout is a BoardBusyError (callers retry it), a malformed file
    a BoardCorruptError, a full disk a BoardFullError: never a raw SQLAlchemy error."""
    try:
        yield
    except DatabaseError as exc:
        cause = exc.orig if exc.orig is not None else exc
        text = str(cause)
        if isinstance(exc, OperationalError) and ("locked" in text or "busy" in text):
            raise BoardBusyError(f"board {path} is busy (locked by another writer): {text}") from exc
        error = board_error(path, cause)
        if type(error) is BoardError:  # nothing the board's own kinds cover: the original error
            raise
        raise error from exc


METADATA_FIELDS = frozenset(
    {"architecture", "model_type", "task_family", "parameter_count", "dtype", "size_bytes", "license", "gated"}
)


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _pk(row: Model | Attempt) -> int:
    """A stored row's id, typed as set (it is None only before the row's first flush)."""
    if row.id is None:
        raise BoardError(f"board is inconsistent: a stored {type(row).__name__} row has no id")
    return row.id


def _json_list(raw: str) -> list[str]:
    return list(loads(raw, []))
