"""The lease protocol: what the team lead's scheduler needs from the board.

Task ownership is a lease plus a fencing token, kept by the team lead alone (workers never open
the board): a result whose lease was reclaimed carries a stale token and every write with it is
refused. `LeaseBoard` is the narrow interface the scheduler is written against and the only one
it uses; `LeaseStore` is the SQL of its lease part (part of BoardStore), the agent rows and the
planning reads come from the store's other parts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from sqlalchemy import bindparam, func, text
from sqlmodel import Session, col, select

from ascendbridge.board.acceptance import keep_acceptance
from ascendbridge.board.base import StaleTokenError, StoreBase, _json_list, _pk
from ascendbridge.board.connection import BoardError
from ascendbridge.board.records import (
    AgentRecord,
    AttemptEnd,
    AttemptRecord,
    AttemptStart,
    CompletionWrites,
    EndWrites,
    HostDeviceRecord,
    ModelRecord,
    NewEvent,
    TaskRecord,
    dumps,
    iso,
    now_iso,
    utcnow,
)
from ascendbridge.board.schema import Attempt, Event, Metric, Model, Stack, Task
from ascendbridge.stages import STAGES, check_stage

if TYPE_CHECKING:  # typing.Unpack needs Python 3.11; annotations only
    from typing_extensions import Unpack


@dataclass(frozen=True)
class ReadyTask:
    """A pending task as the scheduler's selection needs it, read without building full records."""

    task_id: int
    model_pk: int
    stage: str
    priority: int
    plan_devices: object  # the model's discovery plan's device count as stored (None without a plan)
    plan_tensor_parallel: object = None  # its tensor-parallel degree as stored (what a serving engine claims)
    train_processes: object = None  # its training job's world size as stored (what the training stage claims)
    task_family: str | None = None  # the model's task family (None until discovery): what its stages cost
    skip_stages: tuple[str, ...] = ()  # the stages its policy skips (they cost nothing)
    parameter_count: int | None = None  # discovery's count of the model (None until discovery)
    proxy_depth: int | None = None  # the layers of its registered reduced-depth proxy, if any
    config: dict[str, Any] | None = None  # its config as discovery read it (a proxy's size needs it)


def _ready_task(row: tuple[Any, ...]) -> ReadyTask:
    """A row of `ready_tasks`' query as the scheduler reads it (the config's JSON parsed)."""
    task_id, model_pk, stage, priority, devices, tp, processes, family, skips, params, depth, config = row
    return ReadyTask(
        int(task_id),
        int(model_pk),
        str(stage),
        int(priority),
        devices,
        tp,
        processes,
        family,
        tuple(_json_list(skips)),
        params,
        depth,
        json.loads(config) if config else None,
    )


@runtime_checkable
class LeaseBoard(Protocol):
    """Claim (the task the scheduler's selection picked), heartbeat, complete, fail, release,
    reclaim: the lease protocol, plus what containment uses (while_owned, interruptions), the
    attempt records written under a lease, and the little else the scheduler touches: its agent
    rows, one event kind per finding, and the reads it plans with (ready tasks and their models,
    recovery, orphaned tasks)."""

    path: Path

    def ready_tasks(self, stages: Iterable[str], per_stage: int) -> list[ReadyTask]: ...

    def claim_task(self, task_id: int, owner: str, lease_s: float) -> TaskRecord: ...

    def heartbeat_task(self, task_id: int, token: int, lease_s: float) -> str: ...

    def complete_task(
        self, task_id: int, token: int, result: dict[str, Any], **writes: Unpack[CompletionWrites]
    ) -> TaskRecord: ...

    def fail_task(
        self, task_id: int, token: int, diagnosis: dict[str, Any], status: str = "failed", **writes: Unpack[EndWrites]
    ) -> TaskRecord: ...

    def release_task(self, task_id: int, token: int, reason: str, origin: str = "team-lead") -> None: ...

    def reclaim_expired(self, origin: str = "team-lead") -> list[TaskRecord]: ...

    def while_owned(self, task_id: int, token: int, lease_s: float) -> AbstractContextManager[None]: ...

    def interruptions(self, task_id: int) -> int: ...

    def start_attempt(self, task_id: int, token: int, start: AttemptStart) -> int: ...

    def finish_attempt(self, attempt_id: int, end: AttemptEnd) -> None: ...

    # The team lead's and its workers' agent rows (AgentStore).
    def register_agent(self, agent_id: str, role: str, pid: int | None = None) -> AgentRecord: ...

    def agent_heartbeat(
        self, agent_id: str, current_task_id: int | None = None, status: str = "running"
    ) -> AgentRecord: ...

    def stop_agent(self, agent_id: str) -> None: ...

    def record_host_devices(
        self, host: str, rows: list[dict[str, Any]], source: str, origin: str = "team-lead"
    ) -> list[HostDeviceRecord]: ...

    # What the scheduler plans with and reports (RegistryStore, ReportingStore).
    def get_model(self, model_id: str) -> ModelRecord: ...

    def list_models(self) -> list[ModelRecord]: ...

    def list_tasks(
        self, stage: str | None = None, status: str | None = None, model_id: str | None = None
    ) -> list[TaskRecord]: ...

    def list_attempts(self, model_id: str, stage: str | None = None) -> list[tuple[str, AttemptRecord]]: ...

    def status_counts(self) -> dict[str, dict[str, int]]: ...

    def add_event(self, event: NewEvent) -> None: ...


class LeaseStore(StoreBase):
    """The SQL side of LeaseBoard: every write checks the caller's fencing token."""

    # ------------------------------------------------------------------ claims
    def claim_next(
        self, owner: str, lease_s: float, stages: Iterable[str] | None = None, exclude_model_pks: Iterable[int] = ()
    ) -> TaskRecord | None:
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

    def ready_tasks(self, stages: Iterable[str], per_stage: int) -> list[ReadyTask]:
        """The pending tasks of unpaused models in `stages`: each stage's first `per_stage` by model
        priority, then registration (one indexed read, so a board of many models costs the
        scheduler a bounded list per dispatch, not every pending task)."""
        stage_list = [check_stage(x) for x in stages]
        if not stage_list or per_stage < 1:
            return []
        query = text(
            "SELECT task_id, model_pk, stage, priority, plan_devices, plan_tp, train_processes, family, skips,"
            " params, depth, config FROM ("
            " SELECT t.id AS task_id, t.model_pk AS model_pk, t.stage AS stage, m.priority AS priority,"
            "  json_extract(m.metadata_json, '$.decision.plan.devices') AS plan_devices,"
            "  json_extract(m.metadata_json, '$.decision.plan.tensor_parallel_degree') AS plan_tp,"
            "  json_extract(m.training_json, '$.processes') AS train_processes,"
            "  m.task_family AS family, m.skip_stages_json AS skips,"
            "  m.parameter_count AS params, m.proxy_depth AS depth, json_extract(m.metadata_json, '$.config') AS config,"
            "  row_number() OVER (PARTITION BY t.stage ORDER BY m.priority DESC, m.id) AS rank"
            " FROM tasks t JOIN models m ON m.id = t.model_pk"
            " WHERE t.status = 'pending' AND m.paused = 0 AND t.stage IN :stages"
            ") WHERE rank <= :per_stage ORDER BY stage, rank"
        ).bindparams(bindparam("stages", expanding=True))
        with self._read() as s:
            rows = s.connection().execute(query, {"stages": stage_list, "per_stage": per_stage}).all()
        return [_ready_task(tuple(r)) for r in rows]

    def claim_task(self, task_id: int, owner: str, lease_s: float) -> TaskRecord:
        """Take one specific pending task, or raise if someone else has it."""
        with self._write() as s:
            task, model = self._task_with_model(s, task_id)
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
        data = {"owner": owner, "token": task.fencing_token, "attempt": task.attempts}
        self._task_event(s, task, "claimed", f"attempt {task.attempts} claimed by {owner}", data)

    def heartbeat_task(self, task_id: int, token: int, lease_s: float) -> str:
        """Extend the lease; returns the new expiry. Raises StaleTokenError if ownership is lost."""
        with self._write() as s:
            task = self._owned(s, task_id, token)
            task.lease_expires_at = iso(utcnow() + timedelta(seconds=lease_s))
            s.add(task)
            return task.lease_expires_at

    def complete_task(
        self, task_id: int, token: int, result: dict[str, Any], **writes: Unpack[CompletionWrites]
    ) -> TaskRecord:
        """Mark completed (the gate has passed), make the next stage pending, and write the stage's
        figures, model metadata and the attempt's agent-history events (records.CompletionWrites):
        all in one transaction under the fencing token, so only gated numbers ever reach the board."""
        figures = [dict(f) for f in writes.get("figures", ())]
        for figure in figures:
            _check_figure(figure)
        origin = writes.get("origin", "team-lead")
        with self._write() as s:
            task = self._owned(s, task_id, token)
            self._write_alongside(s, task, writes, origin)
            now = now_iso()
            for figure in figures:
                stack = figure.get("stack") or {}
                sid = str(stack.get("stack_id") or "")
                if sid and s.get(Stack, sid) is None:  # each stack is stored once; every figure names it
                    s.add(Stack(stack_id=sid, data_json=dumps(stack.get("data") or {}), first_seen=now))
                    s.flush()
                for name, value in figure["values"].items():
                    s.add(
                        Metric(
                            model_pk=task.model_pk,
                            stage=task.stage,
                            device=str(figure.get("device") or ""),
                            dtype=str(figure.get("dtype") or ""),
                            name=name,
                            value=float(value),
                            unit=(figure.get("units") or {}).get(name, ""),
                            stack_id=sid,
                            ts=now,
                        )
                    )
            task.status = "completed"
            task.owner = None
            task.lease_expires_at = None
            task.finished_at = now
            task.updated_at = now
            task.result_json = dumps(result)
            task.diagnosis_json = None
            s.add(task)
            self._task_event(s, task, "completed", f"{task.stage} completed", {"token": token}, origin)
            self._advance(s, task.model_pk, task.stage)
            model = s.get_one(Model, task.model_pk)
            return TaskRecord.of(task, model)

    def fail_task(
        self, task_id: int, token: int, diagnosis: dict[str, Any], status: str = "failed", **writes: Unpack[EndWrites]
    ) -> TaskRecord:
        """End an attempt without success. 'pending' retries; 'failed'/'blocked' are terminal for
        the stage; 'skipped' means the model leaves the pipeline here (e.g. too large), so every
        later stage is skipped too, with the same diagnosis. Model metadata (the program's reason
        to skip or block, never figures) and the attempt's agent-history events are written in the
        same fenced transaction."""
        if status not in ("pending", "failed", "blocked", "skipped"):
            raise BoardError(f"cannot fail a task into status '{status}'")
        origin = writes.get("origin", "team-lead")
        with self._write() as s:
            task = self._owned(s, task_id, token)
            self._write_alongside(s, task, writes, origin)
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
            message = f"{task.stage} {kind}: {summary}".rstrip(": ")
            self._task_event(s, task, kind, message, {"token": token, "diagnosis": diagnosis}, origin)
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
                        message = f"{other.stage} skipped: model left the pipeline at {task.stage}"
                        self._task_event(s, other, "skipped", message, origin=origin)
            model = s.get_one(Model, task.model_pk)
            return TaskRecord.of(task, model)

    def _write_alongside(self, s: Session, task: Task, writes: EndWrites, origin: str) -> None:
        """The model metadata and agent-history events (ascendbridge/agents/history.py) an ending
        attempt brings, under the task's model and stage."""
        fields, metadata = writes.get("model_fields") or {}, writes.get("model_metadata")
        if fields or metadata is not None:
            self._set_metadata(s, s.get_one(Model, task.model_pk), dict(fields), metadata, origin, task.stage)
        for e in writes.get("events", ()):
            kind, message, data = str(e["kind"]), str(e.get("message", "")), dict(e.get("data") or {})
            self._task_event(s, task, kind, message, data, str(e.get("origin") or "system"))
            keep_acceptance(s, kind, data)  # a host acceptance event is also the host's record

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
            self._task_event(
                s, task, "released", f"{task.stage} returned to pending: {reason}", {"token": token}, origin
            )

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
                self._back_to_pending(
                    s,
                    task,
                    now,
                    f"lease of {task.owner} expired",
                    {"owner": task.owner, "token": task.fencing_token},
                    origin,
                )
                out.append(TaskRecord.of(task, model))
            return out

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
            last_reset = (
                s.exec(select(func.max(Event.id)).where(*mine, col(Event.kind).in_(_OUTCOME_EVENTS))).first() or 0
            )
            return s.exec(
                select(func.count())
                .select_from(Event)
                .where(*mine, col(Event.kind).in_(_INTERRUPTION_EVENTS), col(Event.id) > last_reset)
            ).one()

    # ------------------------------------------------------------------ attempts
    def start_attempt(self, task_id: int, token: int, start: AttemptStart) -> int:
        """Record an attempt; with a placement also where it runs, and a `placed` event (the event
        log then shows which device ran what). A gate re-check does not spend the task's attempts."""
        placement, recheck = start.placement or {}, start.recheck
        with self._write() as s:
            task = self._owned(s, task_id, token)
            row = Attempt(
                task_id=task_id,
                number=task.attempts,
                fencing_token=token,
                command=start.command,
                log_path=start.log_path,
                started_at=now_iso(),
                host=placement.get("host"),
                devices=" ".join(placement.get("devices") or []) if placement.get("exclusive") else "",
                recheck=recheck,
            )
            s.add(row)
            s.flush()
            if start.placement is not None:
                where = row.devices or "cores " + (",".join(map(str, placement.get("cpus") or [])) or "any")
                what = f"gate re-check {recheck} of attempt {task.attempts}" if recheck else f"attempt {task.attempts}"
                data = {**placement, "attempt_id": row.id, "token": token, "recheck": recheck}
                message = f"{task.stage}: {what} on {row.host} {where}"
                self._task_event(s, task, "placed", message, data, origin=task.owner or "team-lead")
            return _pk(row)

    def finish_attempt(self, attempt_id: int, end: AttemptEnd) -> None:
        """Record how an attempt ended. Allowed after the lease is gone: it is history, not state."""
        outcome = end.outcome
        with self._write() as s:
            row = self._row(s, Attempt, attempt_id, "attempt")
            for column, value in end.columns().items():
                setattr(row, column, value)
            row.finished_at = now_iso()
            s.add(row)
            if row.devices:  # the devices it held are free again: the event log pairs this with `placed`
                task = s.get(Task, row.task_id)
                self._event(
                    s,
                    "devices_released",
                    f"{row.devices} released ({outcome})",
                    task.model_pk if task else None,
                    task.stage if task else None,
                    {"host": row.host, "devices": row.devices.split(" "), "attempt_id": row.id},
                )


_INTERRUPTION_EVENTS = ("released", "lease_expired")
_OUTCOME_EVENTS = ("completed", "failed", "blocked", "skipped", "retry", "rollback")


def _check_figure(figure: dict[str, Any]) -> None:
    """A stage's figures must be finite numbers with string names: refuse the whole completion otherwise."""
    values = figure.get("values")
    if not isinstance(values, dict) or not values:
        raise BoardError("a figure set needs a non-empty 'values' object")
    for name, value in values.items():
        if (
            not isinstance(name, str)
            or isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise BoardError(f"figure {name!r} = {value!r} is not a finite number")
