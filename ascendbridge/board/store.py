"""The board store: the only code that reads or writes the board's SQL.

Every state change is one short `BEGIN IMMEDIATE` transaction that also appends its event, so
a process killed at any moment leaves the board either before or after the change, never in
between. Task ownership is a lease plus a fencing token: a worker whose lease was reclaimed
holds a stale token and every write it attempts is refused.
"""

from __future__ import annotations

import math
import os
import re
import socket
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta
from pathlib import Path
from typing import Any, Optional

from sqlalchemy import func, insert
from sqlalchemy.exc import OperationalError
from sqlmodel import Session, col, select

from ascendbridge.board.connection import BoardBusyError, BoardError, open_engines
from ascendbridge.board.records import (
    AgentRecord,
    AttemptRecord,
    EventRecord,
    GuidanceRecord,
    MetricRecord,
    ModelRecord,
    Registration,
    TaskRecord,
    dumps,
    iso,
    loads,
    now_iso,
    utcnow,
)
from ascendbridge.board.schema import Agent, Attempt, Event, Guidance, Metric, Model, Stack, Task
from ascendbridge.naming import base_adaptation_name, hashed_adaptation_name, validate_model_id
from ascendbridge.stages import (
    DONE_STATUSES,
    OPTIONAL_STAGES,
    STAGES,
    check_stage,
    check_status,
    next_stage,
    stage_index,
)

SOURCES = ("huggingface", "local", "hf-cache")
GUIDANCE_STATES = ("open", "applied", "answered", "rejected")


class UnknownModelError(BoardError):
    pass


class InvalidRegistrationError(BoardError, ValueError):
    """A registration request that is wrong in itself (bad id, source, revision, url...)."""


_REVISION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")
MAX_PRIORITY = 1_000_000_000  # well inside SQLite's 64-bit integers


def validate_registration(reg: Registration) -> None:
    """Check one registration before it touches the board; the CLI, the dashboard and
    register_models share it so every entry point refuses the same things."""
    try:
        validate_model_id(reg.model_id)
        for stage in reg.skip_stages:
            check_stage(stage)
    except ValueError as exc:
        raise InvalidRegistrationError(str(exc)) from exc
    if reg.source not in SOURCES:
        raise InvalidRegistrationError(f"unknown source '{reg.source}' (expected one of: {', '.join(SOURCES)})")
    if reg.source == "local" and not reg.path:
        raise InvalidRegistrationError(f"model '{reg.model_id}': source 'local' needs --path")
    if reg.revision is not None and (not _REVISION_RE.match(reg.revision) or ".." in reg.revision):
        raise InvalidRegistrationError(
            f"model '{reg.model_id}': revision '{reg.revision}' is not a branch, tag or commit name"
        )
    if reg.url is not None and not re.match(r"^https?://[^\s'\"`$;|&<>]+$", reg.url):
        raise InvalidRegistrationError(f"model '{reg.model_id}': url must be a plain http(s):// address")
    if len(reg.description) > 2000:
        raise InvalidRegistrationError(f"model '{reg.model_id}': description longer than 2000 characters")
    if abs(reg.priority) > MAX_PRIORITY:
        raise InvalidRegistrationError(
            f"model '{reg.model_id}': priority {reg.priority} is out of range (-{MAX_PRIORITY}..{MAX_PRIORITY})"
        )


class StaleTokenError(BoardError):
    """The caller no longer owns the task (lease reclaimed or task moved on)."""


class BoardStore:
    """Typed operations on one board file. Create one per process (engines are not fork-safe)."""

    def __init__(self, path: str | os.PathLike[str], create: bool = False) -> None:
        self.path = Path(path)
        self._write_engine, self._read_engine = open_engines(self.path, create=create)

    @classmethod
    def init(cls, path: str | os.PathLike[str]) -> "BoardStore":
        return cls(path, create=True)

    def close(self) -> None:
        self._write_engine.dispose()
        self._read_engine.dispose()

    def __enter__(self) -> "BoardStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ sessions
    @contextmanager
    def _write(self) -> Iterator[Session]:
        with _busy_as_board_error(self.path):
            with Session(self._write_engine, expire_on_commit=False) as session:
                with session.begin():
                    yield session

    @contextmanager
    def _read(self) -> Iterator[Session]:
        snapshot = _SNAPSHOT.get()
        if snapshot is not None and snapshot[0] is self:  # inside snapshot(): one shared transaction
            yield snapshot[1]
            return
        with _busy_as_board_error(self.path):
            with Session(self._read_engine, expire_on_commit=False) as session:
                with session.begin():
                    yield session

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
        model_pk: Optional[int] = None,
        stage: Optional[str] = None,
        data: Optional[dict[str, Any]] = None,
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

    @staticmethod
    def _model_row(session: Session, model_id: str) -> Model:
        row = session.exec(select(Model).where(Model.model_id == model_id)).first()
        if row is None:
            raise UnknownModelError(f"unknown model '{model_id}' (see: board_ops.py list_models)")
        return row

    @staticmethod
    def _task_row(session: Session, model_pk: int, stage: str) -> Task:
        row = session.exec(
            select(Task).where(Task.model_pk == model_pk, Task.stage == stage)
        ).first()
        if row is None:  # every model gets all its stage rows at registration
            raise BoardError(f"board is inconsistent: no {stage} task for model #{model_pk}")
        return row

    # ------------------------------------------------------------------ models
    def register_models(
        self, registrations: Iterable[Registration], origin: str = "cli"
    ) -> list[tuple[ModelRecord, bool]]:
        """Register all or nothing. Returns (record, created) pairs; existing ids are reported."""
        regs = list(registrations)
        for reg in regs:
            validate_registration(reg)
        with self._write() as s:
            ids = [r.model_id for r in regs]
            existing = {
                m.model_id: m
                for chunk in _chunks(ids, 500)
                for m in s.exec(select(Model).where(col(Model.model_id).in_(chunk))).all()
            }
            taken = set(s.exec(select(Model.adaptation_name)).all())
            now = now_iso()
            seen: dict[str, dict[str, Any]] = {}  # new model_id -> its column values
            for reg in regs:
                if reg.model_id in existing or reg.model_id in seen:
                    continue
                name = base_adaptation_name(reg.model_id)
                if name in taken:
                    name = hashed_adaptation_name(reg.model_id)
                    if name in taken:
                        raise BoardError(f"adaptation name collision for '{reg.model_id}'")
                taken.add(name)
                skip = sorted(set(reg.skip_stages) | set(OPTIONAL_STAGES))
                seen[reg.model_id] = {
                    "model_id": reg.model_id,
                    "source": reg.source,
                    "url": reg.url,
                    "path": reg.path,
                    "revision": reg.revision,
                    "description": reg.description,
                    "adaptation_name": name,
                    "priority": reg.priority,
                    "allow_remote_code": reg.allow_remote_code,
                    "skip_stages_json": dumps(skip),
                    "paused": False,
                    "env_mode": "",
                    "env_python": None,
                    "metadata_json": "{}",
                    "created_at": now,
                }
            if seen:
                # Core bulk inserts: building ORM objects cost ~1 ms per model, too slow for
                # registering thousands at once (bench/board_bench.py).
                s.execute(insert(Model), list(seen.values()))
                new_ids = list(seen)
                for chunk in _chunks(new_ids, 500):
                    for pk, model_id in s.exec(
                        select(Model.id, Model.model_id).where(col(Model.model_id).in_(chunk))
                    ).all():
                        seen[model_id]["id"] = pk
                task_rows = []
                event_rows = []
                for row in seen.values():
                    for i, stage in enumerate(STAGES):
                        task_rows.append(
                            {
                                "model_pk": row["id"],
                                "stage": stage,
                                "stage_order": i,
                                "status": "pending" if i == 0 else "waiting",
                                "attempts": 0,
                                "fencing_token": 0,
                                "updated_at": now,
                            }
                        )
                    event_rows.append(
                        {
                            "model_pk": row["id"],
                            "stage": None,
                            "kind": "registered",
                            "message": f"registered {row['model_id']} as {row['adaptation_name']}",
                            "data_json": dumps({"source": row["source"], "priority": row["priority"]}),
                            "origin": origin,
                            "ts": now,
                        }
                    )
                s.execute(insert(Task), task_rows)
                s.execute(insert(Event), event_rows)
            records = {mid: ModelRecord.of(row) for mid, row in existing.items()}
            records.update((mid, _new_model_record(row)) for mid, row in seen.items())
        # One pair per request, in the caller's order; an id listed twice is created only once.
        results: list[tuple[ModelRecord, bool]] = []
        reported: set[str] = set()
        for reg in regs:
            created = reg.model_id in seen and reg.model_id not in reported
            reported.add(reg.model_id)
            results.append((records[reg.model_id], created))
        return results

    def get_model(self, model_id: str) -> ModelRecord:
        with self._read() as s:
            return ModelRecord.of(self._model_row(s, model_id))

    def list_models(self) -> list[ModelRecord]:
        with self._read() as s:
            rows = s.exec(select(Model).order_by(col(Model.priority).desc(), Model.id)).all()
            return [ModelRecord.of(r) for r in rows]

    def update_model_metadata(
        self, model_id: str, fields: dict[str, Any], metadata: dict[str, Any], origin: str = "discovery"
    ) -> ModelRecord:
        """Set metadata columns outside any stage (imports, tools, tests). A stage's metadata
        reaches the board only with its gated completion (complete_task)."""
        with self._write() as s:
            row = self._model_row(s, model_id)
            self._set_metadata(s, row, fields, metadata, origin)
            return ModelRecord.of(row)

    def _set_metadata(self, s: Session, row: Model, fields: dict[str, Any], metadata: Optional[dict[str, Any]],
                      origin: str) -> None:
        bad = set(fields) - METADATA_FIELDS
        if bad:
            raise BoardError(f"cannot set model fields: {', '.join(sorted(bad))}")
        for key, value in fields.items():
            setattr(row, key, value)
        if metadata is not None:
            row.metadata_json = dumps(metadata)
        s.add(row)
        self._event(s, "metadata", "discovered metadata stored", row.id, "discovery",
                    {k: v for k, v in fields.items()}, origin)

    def set_priority(self, model_id: str, priority: int, origin: str = "cli") -> ModelRecord:
        with self._write() as s:
            row = self._model_row(s, model_id)
            old = row.priority
            row.priority = priority
            s.add(row)
            self._event(s, "priority", f"priority {old} -> {priority}", row.id, None,
                        {"old": old, "new": priority}, origin)
            return ModelRecord.of(row)

    def set_paused(self, model_id: str, paused: bool, origin: str = "cli") -> ModelRecord:
        with self._write() as s:
            row = self._model_row(s, model_id)
            row.paused = paused
            s.add(row)
            self._event(s, "paused" if paused else "resumed",
                        "model paused" if paused else "model resumed", row.id, None, {}, origin)
            return ModelRecord.of(row)

    def set_allow_remote_code(self, model_id: str, allow: bool, origin: str = "cli") -> ModelRecord:
        with self._write() as s:
            row = self._model_row(s, model_id)
            row.allow_remote_code = allow
            s.add(row)
            self._event(s, "policy", f"allow_remote_code = {allow}", row.id, None,
                        {"allow_remote_code": allow}, origin)
            return ModelRecord.of(row)

    # ------------------------------------------------------------------ task views
    def list_tasks(
        self,
        stage: Optional[str] = None,
        status: Optional[str] = None,
        model_id: Optional[str] = None,
    ) -> list[TaskRecord]:
        if stage:
            check_stage(stage)
        if status:
            check_status(status)
        with self._read() as s:
            q = select(Task, Model).join(Model, col(Task.model_pk) == col(Model.id))
            if stage:
                q = q.where(Task.stage == stage)
            if status:
                q = q.where(Task.status == status)
            if model_id:
                q = q.where(Model.model_id == self._model_row(s, model_id).model_id)
            q = q.order_by(Task.stage_order, col(Model.priority).desc(), Model.id)
            return [TaskRecord.of(t, m) for t, m in s.exec(q).all()]

    def get_task(self, task_id: int) -> TaskRecord:
        with self._read() as s:
            row = s.exec(
                select(Task, Model).join(Model, col(Task.model_pk) == col(Model.id)).where(Task.id == task_id)
            ).first()
            if row is None:
                raise BoardError(f"unknown task #{task_id}")
            return TaskRecord.of(*row)

    def stage_statuses(self) -> dict[str, dict[str, str]]:
        """model_id -> stage -> status for every model, in stage order. Three columns instead of
        full task records: on a 10,000-model board that is the difference between ~1 s and ~10 s."""
        with self._read() as s:
            rows = s.exec(
                select(Model.model_id, Task.stage, Task.status)
                .join(Model, col(Task.model_pk) == col(Model.id))
                .order_by(Task.model_pk, Task.stage_order)
            ).all()
        out: dict[str, dict[str, str]] = {}
        for model_id, stage, status in rows:
            out.setdefault(model_id, {})[stage] = status
        return out

    def status_counts(self) -> dict[str, dict[str, int]]:
        """stage -> status -> count, for progress tables and the dashboard funnel."""
        with self._read() as s:
            rows = s.exec(
                select(Task.stage, Task.status, func.count()).group_by(Task.stage, Task.status)
            ).all()
        counts: dict[str, dict[str, int]] = {stage: {} for stage in STAGES}
        for stage, status, n in rows:
            counts.setdefault(stage, {})[status] = n
        return counts

    # ------------------------------------------------------------------ claims
    def claim_next(
        self,
        owner: str,
        lease_s: float,
        stages: Optional[Iterable[str]] = None,
        exclude_model_pks: Iterable[int] = (),
    ) -> Optional[TaskRecord]:
        """Atomically take the most urgent pending task: stage order, priority, registration."""
        stage_list = [check_stage(x) for x in stages] if stages is not None else list(STAGES)
        if not stage_list:
            return None
        excluded = list(exclude_model_pks)
        with self._write() as s:
            q = (
                select(Task, Model)
                .join(Model, col(Task.model_pk) == col(Model.id))
                .where(Task.status == "pending", col(Task.stage).in_(stage_list), col(Model.paused).is_(False))
                .order_by(Task.stage_order, col(Model.priority).desc(), Model.id)
                .limit(1)
            )
            if excluded:
                q = q.where(col(Model.id).not_in(excluded))
            row = s.exec(q).first()
            if row is None:
                return None
            task, model = row
            self._take(s, task, owner, lease_s)
            return TaskRecord.of(task, model)

    def claim_task(self, task_id: int, owner: str, lease_s: float) -> TaskRecord:
        """Take one specific pending task, or raise if someone else has it."""
        with self._write() as s:
            row = s.exec(
                select(Task, Model).join(Model, col(Task.model_pk) == col(Model.id)).where(Task.id == task_id)
            ).first()
            if row is None:
                raise BoardError(f"unknown task #{task_id}")
            task, model = row
            if task.status != "pending":
                raise StaleTokenError(f"task #{task_id} is {task.status}, not pending")
            self._take(s, task, owner, lease_s)
            return TaskRecord.of(task, model)

    def _take(self, s: Session, task: Task, owner: str, lease_s: float) -> None:
        now = utcnow()
        task.status = "in_progress"
        task.owner = owner
        task.fencing_token += 1
        task.attempts += 1
        task.lease_expires_at = iso(now + timedelta(seconds=lease_s))
        task.started_at = iso(now)
        task.finished_at = None
        task.updated_at = iso(now)
        s.add(task)
        self._event(s, "claimed", f"attempt {task.attempts} claimed by {owner}", task.model_pk,
                    task.stage, {"owner": owner, "token": task.fencing_token, "attempt": task.attempts})

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

    def heartbeat_task(self, task_id: int, token: int, lease_s: float) -> str:
        """Extend the lease; returns the new expiry. Raises StaleTokenError if ownership is lost."""
        with self._write() as s:
            task = self._owned(s, task_id, token)
            task.lease_expires_at = iso(utcnow() + timedelta(seconds=lease_s))
            s.add(task)
            return task.lease_expires_at

    def complete_task(
        self, task_id: int, token: int, result: dict[str, Any], origin: str = "team-lead",
        figures: Iterable[dict[str, Any]] = (), model_fields: Optional[dict[str, Any]] = None,
        model_metadata: Optional[dict[str, Any]] = None,
    ) -> TaskRecord:
        """Mark completed (the gate has passed), make the next stage pending, and write the stage's
        figures ({"values", "device", "dtype", "units", "stack"} each) and model metadata: all in one
        transaction under the fencing token, so only gated numbers ever reach the board."""
        figures = [dict(f) for f in figures]
        for figure in figures:
            _check_figure(figure)
        with self._write() as s:
            task = self._owned(s, task_id, token)
            if model_fields or model_metadata is not None:
                self._set_metadata(s, s.get(Model, task.model_pk), dict(model_fields or {}), model_metadata, origin)
            now = now_iso()
            for figure in figures:
                stack = figure.get("stack") or {}
                sid = str(stack.get("stack_id") or "")
                if sid and s.get(Stack, sid) is None:  # each stack is stored once; every figure names it
                    s.add(Stack(stack_id=sid, data_json=dumps(stack.get("data") or {}), first_seen=now))
                    s.flush()
                for name, value in figure["values"].items():
                    s.add(Metric(model_pk=task.model_pk, stage=task.stage, device=str(figure.get("device") or ""),
                                 dtype=str(figure.get("dtype") or ""), name=name, value=float(value),
                                 unit=(figure.get("units") or {}).get(name, ""), stack_id=sid, ts=now))
            task.status = "completed"
            task.owner = None
            task.lease_expires_at = None
            task.finished_at = now
            task.updated_at = now
            task.result_json = dumps(result)
            task.diagnosis_json = None
            s.add(task)
            self._event(s, "completed", f"{task.stage} completed", task.model_pk, task.stage,
                        {"token": token}, origin)
            self._advance(s, task.model_pk, task.stage)
            model = s.get(Model, task.model_pk)
            return TaskRecord.of(task, model)

    def fail_task(
        self,
        task_id: int,
        token: int,
        diagnosis: dict[str, Any],
        status: str = "failed",
        origin: str = "team-lead",
        model_fields: Optional[dict[str, Any]] = None,
        model_metadata: Optional[dict[str, Any]] = None,
    ) -> TaskRecord:
        """End an attempt without success. 'pending' retries; 'failed'/'blocked' are terminal for
        the stage; 'skipped' means the model leaves the pipeline here (e.g. too large), so every
        later stage is skipped too, with the same diagnosis. Model metadata (the program's reason
        to skip or block, never figures) is written in the same fenced transaction."""
        if status not in ("pending", "failed", "blocked", "skipped"):
            raise BoardError(f"cannot fail a task into status '{status}'")
        with self._write() as s:
            task = self._owned(s, task_id, token)
            if model_fields or model_metadata is not None:
                self._set_metadata(s, s.get(Model, task.model_pk), dict(model_fields or {}), model_metadata, origin)
            now = now_iso()
            task.status = status
            task.owner = None
            task.lease_expires_at = None
            task.finished_at = now
            task.updated_at = now
            task.diagnosis_json = dumps(diagnosis)
            s.add(task)
            kind = {"pending": "retry", "failed": "failed", "blocked": "blocked", "skipped": "skipped"}[status]
            summary = diagnosis.get("summary") or diagnosis.get("reason") or ""
            self._event(s, kind, f"{task.stage} {kind}: {summary}".rstrip(": "), task.model_pk,
                        task.stage, {"token": token, "diagnosis": diagnosis}, origin)
            if status == "skipped":
                later = s.exec(
                    select(Task).where(Task.model_pk == task.model_pk, Task.stage_order > task.stage_order)
                ).all()
                for other in later:
                    if other.status in ("waiting", "pending"):
                        other.status = "skipped"
                        other.finished_at = now
                        other.updated_at = now
                        other.diagnosis_json = dumps(diagnosis)
                        s.add(other)
                        self._event(s, "skipped", f"{other.stage} skipped: model left the pipeline at {task.stage}",
                                    task.model_pk, other.stage, {}, origin)
            model = s.get(Model, task.model_pk)
            return TaskRecord.of(task, model)

    def release_task(self, task_id: int, token: int, reason: str, origin: str = "team-lead") -> None:
        """Give a task back untouched (shutdown): pending again, the attempt not counted."""
        with self._write() as s:
            task = self._owned(s, task_id, token)
            task.status = "pending"
            task.owner = None
            task.lease_expires_at = None
            task.attempts = max(0, task.attempts - 1)
            task.updated_at = now_iso()
            s.add(task)
            self._event(s, "released", f"{task.stage} returned to pending: {reason}", task.model_pk,
                        task.stage, {"token": token}, origin)

    def reclaim_expired(self, origin: str = "team-lead") -> list[TaskRecord]:
        """Return every in-progress task whose lease has run out to pending."""
        now = now_iso()
        with self._write() as s:
            rows = s.exec(
                select(Task, Model)
                .join(Model, col(Task.model_pk) == col(Model.id))
                .where(Task.status == "in_progress", col(Task.lease_expires_at) < now)
            ).all()
            out = []
            for task, model in rows:
                owner = task.owner
                task.status = "pending"
                task.owner = None
                task.lease_expires_at = None
                task.updated_at = now
                s.add(task)
                self._event(s, "lease_expired", f"{task.stage}: lease of {owner} expired, back to pending",
                            task.model_pk, task.stage, {"owner": owner, "token": task.fencing_token}, origin)
                out.append(TaskRecord.of(task, model))
            return out

    def _advance(self, s: Session, model_pk: int, done_stage: str) -> None:
        """Make the stage after `done_stage` pending, skipping stages the model's policy skips and
        passing over stages already skipped (a stage skipped before its predecessor finished)."""
        model = s.get(Model, model_pk)
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
                self._event(s, "skipped", f"{stage} skipped by policy", model_pk, stage, {})
                stage = next_stage(stage)
                continue
            task.status = "pending"
            s.add(task)
            self._event(s, "pending", f"{stage} is now pending", model_pk, stage, {})
            return

    # ------------------------------------------------------------------ human steering
    def retry(self, model_id: str, stage: Optional[str] = None, origin: str = "cli") -> TaskRecord:
        """Return a failed/blocked/skipped stage (default: the first such) to pending."""
        with self._write() as s:
            model = self._model_row(s, model_id)
            tasks = s.exec(select(Task).where(Task.model_pk == model.id).order_by(Task.stage_order)).all()
            if stage is None:
                target = next((t for t in tasks if t.status in ("failed", "blocked")), None)
                if target is None:
                    raise BoardError(f"model '{model_id}' has no failed or blocked stage to retry")
            else:
                check_stage(stage)
                target = next(t for t in tasks if t.stage == stage)
                if target.status not in ("failed", "blocked", "skipped"):
                    raise BoardError(
                        f"cannot retry {stage} of '{model_id}': it is {target.status} "
                        "(only failed, blocked or skipped stages can be retried)"
                    )
                prev = [t for t in tasks if t.stage_order < target.stage_order]
                if prev and prev[-1].status not in DONE_STATUSES:
                    raise BoardError(f"cannot retry {stage} of '{model_id}': {prev[-1].stage} is {prev[-1].status}")
            old = target.status
            target.status = "pending"
            target.attempts = 0
            target.diagnosis_json = None
            target.finished_at = None
            target.updated_at = now_iso()
            s.add(target)
            self._event(s, "retry", f"{target.stage} {old} -> pending (retry requested)", model.id,
                        target.stage, {"from": old}, origin)
            self._unskip_after(s, model, target, tasks)
            return TaskRecord.of(target, model)

    def _unskip_after(self, s: Session, model: Model, target: Task, tasks: list[Task]) -> None:
        """A retried stage re-enters the pipeline: it leaves the model's skip list, and the run of
        skipped stages right after it (a cascade from 'model left the pipeline') waits again;
        `_advance` re-applies the remaining skip policy as the chain moves on."""
        skips = set(_json_list(model.skip_stages_json))
        if target.stage in skips:
            skips.discard(target.stage)
            model.skip_stages_json = dumps(sorted(skips))
            s.add(model)
        for task in tasks:
            if task.stage_order <= target.stage_order:
                continue
            if task.status not in ("skipped", "waiting"):
                break
            if task.status == "skipped":
                task.status = "waiting"
                task.diagnosis_json = None
                task.finished_at = None
                task.updated_at = now_iso()
                s.add(task)

    def skip(self, model_id: str, stage: str, origin: str = "cli") -> TaskRecord:
        check_stage(stage)
        with self._write() as s:
            model = self._model_row(s, model_id)
            task = self._task_row(s, model.id, stage)
            if task.status in ("in_progress", "completed"):
                raise BoardError(f"cannot skip {stage} of '{model_id}': it is {task.status}")
            old = task.status
            now = now_iso()
            task.status = "skipped"
            task.finished_at = now
            task.updated_at = now
            s.add(task)
            skips = set(_json_list(model.skip_stages_json)) | {stage}
            model.skip_stages_json = dumps(sorted(skips))
            s.add(model)
            self._event(s, "skipped", f"{stage} {old} -> skipped (requested)", model.id, stage,
                        {"from": old}, origin)
            prev = self._prev_done(s, model.id, stage)
            if prev:
                self._advance(s, model.id, stage)
            return TaskRecord.of(task, model)

    def _prev_done(self, s: Session, model_pk: int, stage: str) -> bool:
        i = stage_index(stage)
        if i == 0:
            return True
        return self._task_row(s, model_pk, STAGES[i - 1]).status in DONE_STATUSES

    def rollback(self, model_id: str, to_stage: str, origin: str = "cli") -> list[TaskRecord]:
        """Re-run from `to_stage`: it becomes pending, later stages wait for it again."""
        check_stage(to_stage)
        with self._write() as s:
            model = self._model_row(s, model_id)
            if not self._prev_done(s, model.id, to_stage):
                raise BoardError(f"cannot roll '{model_id}' back to {to_stage}: its predecessor is not done")
            busy = s.exec(
                select(Task).where(Task.model_pk == model.id, Task.status == "in_progress")
            ).first()
            if busy is not None:
                raise BoardError(
                    f"cannot roll '{model_id}' back while {busy.stage} is in progress; pause it first"
                )
            now = now_iso()
            changed = []
            skips = set(_json_list(model.skip_stages_json))
            tasks = s.exec(
                select(Task).where(Task.model_pk == model.id, Task.stage_order >= stage_index(to_stage))
                .order_by(Task.stage_order)
            ).all()
            for task in tasks:
                old = task.status
                task.status = "pending" if task.stage == to_stage else "waiting"
                task.attempts = 0
                task.result_json = None
                task.diagnosis_json = None
                task.started_at = None
                task.finished_at = None
                task.updated_at = now
                s.add(task)
                changed.append(TaskRecord.of(task, model))
                self._event(s, "rollback", f"{task.stage} {old} -> {task.status} (rollback to {to_stage})",
                            model.id, task.stage, {"from": old, "to_stage": to_stage}, origin)
            skips.discard(to_stage)
            model.skip_stages_json = dumps(sorted(skips))
            s.add(model)
            return changed

    # ------------------------------------------------------------------ containment
    @contextmanager
    def while_owned(self, task_id: int, token: int, lease_s: float) -> Iterator[None]:
        """Hold the board's write lock while the caller acts for the task's current owner (the
        team lead promoting a gated attempt directory): raises StaleTokenError before the body
        runs if `token` is stale, and no reclaim can interleave until the body is done."""
        with self._write() as s:
            task = self._owned(s, task_id, token)
            task.lease_expires_at = iso(utcnow() + timedelta(seconds=lease_s))
            s.add(task)
            yield

    def interruptions(self, task_id: int) -> int:
        """Attempts of this task that ended without an outcome (released, lease expired) since its
        last outcome or a person's retry/rollback: what bounds a crash loop."""
        with self._read() as s:
            task = s.get(Task, task_id)
            if task is None:
                raise BoardError(f"unknown task #{task_id}")
            mine = (Event.model_pk == task.model_pk, Event.stage == task.stage)
            last_reset = s.exec(select(func.max(Event.id)).where(
                *mine, col(Event.kind).in_(_OUTCOME_EVENTS))).first() or 0
            return s.exec(select(func.count()).select_from(Event).where(
                *mine, col(Event.kind).in_(_INTERRUPTION_EVENTS), col(Event.id) > last_reset)).one()

    # ------------------------------------------------------------------ attempts
    def start_attempt(
        self, task_id: int, token: int, command: str, log_path: str, agent_backend: str = "builtin"
    ) -> int:
        with self._write() as s:
            task = self._owned(s, task_id, token)
            row = Attempt(
                task_id=task_id,
                number=task.attempts,
                fencing_token=token,
                command=command,
                log_path=log_path,
                agent_backend=agent_backend,
                started_at=now_iso(),
            )
            s.add(row)
            s.flush()
            return row.id

    def finish_attempt(
        self,
        attempt_id: int,
        exit_code: Optional[int],
        duration_s: float,
        outcome: str,
        diagnosis: Optional[dict[str, Any]] = None,
        fix_applied: Optional[str] = None,
    ) -> None:
        """Record how an attempt ended. Allowed after the lease is gone: it is history, not state."""
        with self._write() as s:
            row = s.get(Attempt, attempt_id)
            if row is None:
                raise BoardError(f"unknown attempt #{attempt_id}")
            row.exit_code = exit_code
            row.duration_s = duration_s
            row.outcome = outcome
            row.diagnosis_json = dumps(diagnosis) if diagnosis is not None else None
            row.fix_applied = fix_applied
            row.finished_at = now_iso()
            s.add(row)

    def list_attempts(self, model_id: str, stage: Optional[str] = None) -> list[tuple[str, AttemptRecord]]:
        with self._read() as s:
            model = self._model_row(s, model_id)
            q = (
                select(Task.stage, Attempt)
                .join(Task, col(Attempt.task_id) == col(Task.id))
                .where(Task.model_pk == model.id)
                .order_by(Task.stage_order, Attempt.id)
            )
            if stage:
                q = q.where(Task.stage == check_stage(stage))
            return [(st, AttemptRecord.of(a)) for st, a in s.exec(q).all()]

    def completed_durations(self) -> dict[str, list[float]]:
        """stage -> durations (s) of every completed attempt on the board, oldest first: the
        basis of the team lead's ETA (a stage's typical cost here, from this run and earlier)."""
        with self._read() as s:
            q = (
                select(Task.stage, Attempt.duration_s)
                .join(Task, col(Attempt.task_id) == col(Task.id))
                .where(Attempt.outcome == "completed", col(Attempt.duration_s).is_not(None))
                .order_by(Attempt.id)
            )
            out: dict[str, list[float]] = {}
            for stage, seconds in s.exec(q).all():
                out.setdefault(stage, []).append(float(seconds))
            return out

    # ------------------------------------------------------------------ agents
    def register_agent(self, agent_id: str, role: str, pid: Optional[int] = None) -> AgentRecord:
        now = now_iso()
        with self._write() as s:
            row = s.get(Agent, agent_id) or Agent(id=agent_id, role=role, last_heartbeat=now, started_at=now)
            row.role = role
            row.pid = pid if pid is not None else os.getpid()
            row.host = socket.gethostname()
            row.status = "running"
            row.last_heartbeat = now
            row.started_at = now
            s.add(row)
            self._event(s, "agent_started", f"{role} {agent_id} started", data={"pid": row.pid}, origin=agent_id)
            return AgentRecord.of(row)

    def agent_heartbeat(
        self, agent_id: str, current_task_id: Optional[int] = None, status: str = "running"
    ) -> AgentRecord:
        with self._write() as s:
            row = s.get(Agent, agent_id)
            if row is None:
                raise BoardError(f"unknown agent '{agent_id}' (register it first)")
            row.last_heartbeat = now_iso()
            row.current_task_id = current_task_id
            row.status = status
            s.add(row)
            return AgentRecord.of(row)

    def stop_agent(self, agent_id: str) -> None:
        with self._write() as s:
            row = s.get(Agent, agent_id)
            if row is None:
                return
            row.status = "stopped"
            row.current_task_id = None
            row.last_heartbeat = now_iso()
            s.add(row)
            self._event(s, "agent_stopped", f"{row.role} {agent_id} stopped", origin=agent_id)

    def list_agents(self) -> list[AgentRecord]:
        with self._read() as s:
            return [AgentRecord.of(r) for r in s.exec(select(Agent).order_by(Agent.started_at)).all()]

    def cleanup_stale_agents(self, stale_after_s: float, origin: str = "cli") -> list[AgentRecord]:
        """Agents silent for longer than the threshold: mark stale, expire their leases, requeue."""
        cutoff = iso(utcnow() - timedelta(seconds=stale_after_s))
        now = now_iso()
        with self._write() as s:
            stale = s.exec(
                select(Agent).where(Agent.status == "running", col(Agent.last_heartbeat) < cutoff)
            ).all()
            out = []
            for agent in stale:
                agent.status = "stale"
                s.add(agent)
                tasks = s.exec(
                    select(Task).where(Task.status == "in_progress", Task.owner == agent.id)
                ).all()
                for task in tasks:
                    task.status = "pending"
                    task.owner = None
                    task.lease_expires_at = None
                    task.updated_at = now
                    s.add(task)
                    self._event(s, "lease_expired", f"{task.stage}: owner {agent.id} is stale, back to pending",
                                task.model_pk, task.stage, {"owner": agent.id}, origin)
                self._event(s, "agent_stale", f"{agent.role} {agent.id} marked stale "
                            f"(last heartbeat {agent.last_heartbeat})", data={"tasks": len(tasks)}, origin=origin)
                out.append(AgentRecord.of(agent))
            return out

    # ------------------------------------------------------------------ events
    def add_event(
        self,
        kind: str,
        message: str,
        model_id: Optional[str] = None,
        stage: Optional[str] = None,
        data: Optional[dict[str, Any]] = None,
        origin: str = "system",
    ) -> None:
        with self._write() as s:
            pk = self._model_row(s, model_id).id if model_id else None
            self._event(s, kind, message, pk, stage, data, origin)

    def add_events(
        self, events: Iterable[tuple[str, str, Optional[str], Optional[str]]], origin: str = "system"
    ) -> int:
        """Append many (kind, message, model_id, stage) events in one transaction, all or none:
        imports and benchmarks need a long history without one transaction per event."""
        rows = list(events)
        with self._write() as s:
            wanted = sorted({mid for _, _, mid, _ in rows if mid})
            pks: dict[str, int] = {}
            for chunk in _chunks(wanted, 500):
                pks.update(s.exec(select(Model.model_id, Model.id).where(col(Model.model_id).in_(chunk))).all())
            missing = [mid for mid in wanted if mid not in pks]
            if missing:
                raise UnknownModelError(f"unknown model '{missing[0]}' (see: board_ops.py list_models)")
            for _, _, _, stage in rows:
                if stage is not None:
                    check_stage(stage)
            now = now_iso()
            if rows:
                s.execute(insert(Event), [
                    {"model_pk": pks[mid] if mid else None, "stage": stage, "kind": kind, "message": message,
                     "data_json": "{}", "origin": origin, "ts": now}
                    for kind, message, mid, stage in rows
                ])
        return len(rows)

    def list_events(
        self, model_id: Optional[str] = None, after_id: int = 0, limit: int = 100, newest_first: bool = False
    ) -> list[EventRecord]:
        with self._read() as s:
            q = select(Event, Model.model_id).outerjoin(Model, col(Event.model_pk) == col(Model.id))
            if model_id:
                q = q.where(Event.model_pk == self._model_row(s, model_id).id)
            if after_id:
                q = q.where(col(Event.id) > after_id)
            q = q.order_by(col(Event.id).desc() if newest_first else Event.id).limit(limit)
            return [EventRecord.of(e, mid) for e, mid in s.exec(q).all()]

    def latest_event(self, kind: str) -> Optional[EventRecord]:
        """The newest event of one kind (e.g. the last `env_probe`), or None."""
        with self._read() as s:
            row = s.exec(
                select(Event, Model.model_id).outerjoin(Model, col(Event.model_pk) == col(Model.id))
                .where(Event.kind == kind).order_by(col(Event.id).desc()).limit(1)
            ).first()
            return EventRecord.of(*row) if row else None

    def events_of_kind(self, kind: str, model_id: Optional[str] = None, limit: int = 1000) -> list[EventRecord]:
        """Events of one kind, newest first, optionally for one model (e.g. `agent_run`)."""
        with self._read() as s:
            q = (select(Event, Model.model_id).outerjoin(Model, col(Event.model_pk) == col(Model.id))
                 .where(Event.kind == kind))
            if model_id:
                q = q.where(Event.model_pk == self._model_row(s, model_id).id)
            q = q.order_by(col(Event.id).desc()).limit(limit)
            return [EventRecord.of(e, mid) for e, mid in s.exec(q).all()]

    # ------------------------------------------------------------------ guidance
    def add_guidance(self, text: str, model_id: Optional[str] = None, origin: str = "cli") -> GuidanceRecord:
        text = (text or "").strip()
        if not text:
            raise BoardError("guidance text is empty")
        if len(text) > 4000:
            raise BoardError("guidance text is longer than 4000 characters")
        with self._write() as s:
            pk = self._model_row(s, model_id).id if model_id else None
            row = Guidance(model_pk=pk, text=text, origin=origin, created_at=now_iso())
            s.add(row)
            s.flush()
            self._event(s, "guidance", text[:200], pk, None, {"guidance_id": row.id}, origin)
            return GuidanceRecord.of(row, model_id)

    def list_guidance(self, model_id: Optional[str] = None, state: Optional[str] = None) -> list[GuidanceRecord]:
        if state and state not in GUIDANCE_STATES:
            raise BoardError(f"unknown guidance state '{state}' (expected one of: {', '.join(GUIDANCE_STATES)})")
        with self._read() as s:
            q = select(Guidance, Model.model_id).outerjoin(Model, col(Guidance.model_pk) == col(Model.id))
            if model_id:
                q = q.where(Guidance.model_pk == self._model_row(s, model_id).id)
            if state:
                q = q.where(Guidance.state == state)
            return [GuidanceRecord.of(g, mid) for g, mid in s.exec(q.order_by(Guidance.id)).all()]

    def reply_guidance(self, guidance_id: int, state: str, reply: str, origin: str = "team-lead") -> GuidanceRecord:
        if state not in GUIDANCE_STATES or state == "open":
            raise BoardError(f"cannot answer guidance with state '{state}'")
        with self._write() as s:
            row = s.get(Guidance, guidance_id)
            if row is None:
                raise BoardError(f"unknown guidance #{guidance_id}")
            row.state = state
            row.reply = reply
            row.replied_at = now_iso()
            s.add(row)
            self._event(s, "guidance_reply", reply[:200], row.model_pk, None,
                        {"guidance_id": row.id, "state": state}, origin)
            model = s.get(Model, row.model_pk) if row.model_pk else None
            return GuidanceRecord.of(row, model.model_id if model else None)

    # ------------------------------------------------------------------ metrics
    # Figures are written only by complete_task (a passing gate, under the fencing token).

    def get_stack(self, stack_id: str) -> Optional[dict[str, Any]]:
        """The recorded stack of an id (None when unknown)."""
        with self._read() as s:
            row = s.get(Stack, stack_id)
            return loads(row.data_json, {}) if row else None

    def list_stacks(self) -> dict[str, dict[str, Any]]:
        with self._read() as s:
            return {row.stack_id: loads(row.data_json, {}) for row in s.exec(select(Stack).order_by(Stack.first_seen))}

    def set_env_mode(self, model_id: str, mode: str, python: Optional[str] = None, origin: str = "cli") -> ModelRecord:
        """Per-model environment mode: "" (the run's), "locked", or "system" with its interpreter."""
        if mode not in ("", "locked", "system"):
            raise BoardError(f"unknown environment mode '{mode}' (expected locked or system)")
        if mode == "system" and not python:
            raise BoardError("environment mode 'system' needs the interpreter's path")
        with self._write() as s:
            row = self._model_row(s, model_id)
            row.env_mode, row.env_python = mode, (python if mode == "system" else None)
            s.add(row)
            self._event(s, "policy", f"environment mode = {mode or 'run default'}"
                        + (f" ({python})" if row.env_python else ""), row.id, None,
                        {"env_mode": mode, "env_python": row.env_python}, origin)
            return ModelRecord.of(row)

    def list_metrics(self, model_id: Optional[str] = None, stage: Optional[str] = None) -> list[MetricRecord]:
        with self._read() as s:
            q = select(Metric, Model.model_id).join(Model, col(Metric.model_pk) == col(Model.id))
            if model_id:
                q = q.where(Metric.model_pk == self._model_row(s, model_id).id)
            if stage:
                q = q.where(Metric.stage == check_stage(stage))
            return [MetricRecord.of(m, mid) for m, mid in s.exec(q.order_by(Metric.id)).all()]

    # ------------------------------------------------------------------ export
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
            "guidance": [g.model_dump() for g in self.list_guidance()],
            "metrics": [x.model_dump() for x in self.list_metrics()],
            "stacks": self.list_stacks(),
            "events": [e.model_dump() for e in self.list_events(limit=10**9)],
        }


_SNAPSHOT: ContextVar[Optional[tuple["BoardStore", Session]]] = ContextVar("board_snapshot", default=None)
_INTERRUPTION_EVENTS = ("released", "lease_expired")
_OUTCOME_EVENTS = ("completed", "failed", "blocked", "skipped", "retry", "rollback")


@contextmanager
def _busy_as_board_error(path: Path) -> Iterator[None]:
    """A lock held past the busy timeout is a BoardBusyError (callers retry it), not a raw
    SQLAlchemy error."""
    try:
        yield
    except OperationalError as exc:
        text = str(exc.orig if exc.orig is not None else exc)
        if "locked" in text or "busy" in text:
            raise BoardBusyError(f"board {path} is busy (locked by another writer): {text}") from exc
        raise


METADATA_FIELDS = frozenset({"architecture", "model_type", "task_family", "parameter_count", "dtype",
                             "size_bytes", "license", "gated"})


def _check_figure(figure: dict[str, Any]) -> None:
    """A stage's figures must be finite numbers with string names: refuse the whole completion otherwise."""
    values = figure.get("values")
    if not isinstance(values, dict) or not values:
        raise BoardError("a figure set needs a non-empty 'values' object")
    for name, value in values.items():
        if not isinstance(name, str) or isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value):
            raise BoardError(f"figure {name!r} = {value!r} is not a finite number")


def _new_model_record(row: dict[str, Any]) -> ModelRecord:
    """The record of a just-inserted model straight from its column values (no ORM object)."""
    fields = {k: v for k, v in row.items() if k not in ("id", "skip_stages_json", "metadata_json")}
    return ModelRecord(pk=row["id"], skip_stages=loads(row["skip_stages_json"], []), metadata={}, **fields)


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _json_list(raw: str) -> list[str]:
    return list(loads(raw, []))


__all__ = [
    "BoardStore",
    "BoardError",
    "StaleTokenError",
    "UnknownModelError",
    "InvalidRegistrationError",
    "validate_registration",
    "Registration",
    "SOURCES",
    "GUIDANCE_STATES",
]
