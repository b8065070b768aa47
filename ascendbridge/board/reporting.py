"""Reporting: task views, attempt history, events, metrics and the one-snapshot export.

Reads only, apart from appending events; figures reach the board only through complete_task.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sqlalchemy import case, func, insert
from sqlmodel import col, select

from ascendbridge.board.base import StoreBase, UnknownModelError, _chunks
from ascendbridge.board.records import (
    AttemptRecord,
    EventRecord,
    MetricRecord,
    NewEvent,
    TaskRecord,
    dumps,
    loads,
    now_iso,
)
from ascendbridge.board.schema import Attempt, Event, Metric, Model, Stack, Task
from ascendbridge.stages import COSTED_OUTCOMES, STAGES, check_stage, check_status

if TYPE_CHECKING:
    from ascendbridge.board.records import (
        AgentRecord,
        GuidanceRecord,
        HostAcceptanceRecord,
        HostDeviceRecord,
        ModelRecord,
    )


class ReportingStore(StoreBase):
    """What the dashboard, the CLI and export read. `export` also calls list_models, list_agents,
    list_host_devices, host_acceptances and list_guidance, which BoardStore gets from its other parts."""

    if TYPE_CHECKING:  # those parts' methods, declared for the type checker only (no second definition)

        def list_models(self) -> list[ModelRecord]: ...

        def list_agents(self) -> list[AgentRecord]: ...

        def list_host_devices(self) -> list[HostDeviceRecord]: ...

        def host_acceptances(self, host: str | None = None) -> list[HostAcceptanceRecord]: ...

        def list_guidance(self, model_id: str | None = None, state: str | None = None) -> list[GuidanceRecord]: ...

    # ------------------------------------------------------------------ task views
    def list_tasks(
        self, stage: str | None = None, status: str | None = None, model_id: str | None = None
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
            q = q.order_by(col(Task.stage_order), col(Model.priority).desc(), col(Model.id))
            return [TaskRecord.of(t, m) for t, m in s.exec(q).all()]

    def get_task(self, task_id: int) -> TaskRecord:
        with self._read() as s:
            return TaskRecord.of(*self._task_with_model(s, task_id))

    def stage_statuses(self) -> dict[str, dict[str, str]]:
        """model_id -> stage -> status for every model, in stage order. Three columns instead of
        full task records: on a 10,000-model board that is the difference between ~1 s and ~10 s."""
        with self._read() as s:
            rows = s.exec(
                select(Model.model_id, Task.stage, Task.status)
                .join(Model, col(Task.model_pk) == col(Model.id))
                .order_by(col(Task.model_pk), col(Task.stage_order))
            ).all()
        out: dict[str, dict[str, str]] = {}
        for model_id, stage, status in rows:
            out.setdefault(model_id, {})[stage] = status
        return out

    def status_counts(self) -> dict[str, dict[str, int]]:
        """stage -> status -> count, for progress tables and the dashboard funnel."""
        with self._read() as s:
            rows = s.exec(select(Task.stage, Task.status, func.count()).group_by(Task.stage, Task.status)).all()
        counts: dict[str, dict[str, int]] = {stage: {} for stage in STAGES}
        for stage, status, n in rows:
            counts.setdefault(stage, {})[status] = n
        return counts

    # ------------------------------------------------------------------ attempts
    def list_attempts(self, model_id: str, stage: str | None = None) -> list[tuple[str, AttemptRecord]]:
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

    def costed_attempts(self) -> list[tuple[str, str | None, float, int | None]]:
        """(stage, the model's task family, duration s, the model's parameter count) of every attempt that ran its stage to its own
        end (COSTED_OUTCOMES), oldest first: the basis of the team lead's ETA and of the host's stage
        history (ascendbridge/teamlead/eta.py). A gate re-check (`recheck` > 0) ran the gate alone:
        not what the stage costs."""
        # A proxy's attempts built fewer parameters than the model's count: their size is unknown here.
        built = case((col(Model.proxy_depth).is_(None), col(Model.parameter_count)), else_=None)
        with self._read() as s:
            q = (
                select(Task.stage, Model.task_family, Attempt.duration_s, built)
                .join(Task, col(Attempt.task_id) == col(Task.id))
                .join(Model, col(Task.model_pk) == col(Model.id))
                .where(
                    col(Attempt.outcome).in_(sorted(COSTED_OUTCOMES)),
                    Attempt.recheck == 0,
                    col(Attempt.duration_s).is_not(None),
                )
                .order_by(Attempt.id)
            )
            return [(stage, family, float(seconds), params) for stage, family, seconds, params in s.exec(q).all()]

    # ------------------------------------------------------------------ events
    def add_event(self, event: NewEvent) -> None:
        self.add_events([event])

    def add_events(self, events: Iterable[NewEvent]) -> int:
        """Append events in one transaction, all or none (an unknown model or stage refuses them
        all): imports and benchmarks need a long history without one transaction per event."""
        rows = list(events)
        with self._write() as s:
            wanted = sorted({e.model_id for e in rows if e.model_id})
            pks: dict[str, int] = {}
            for chunk in _chunks(wanted, 500):
                pks.update(s.exec(select(Model.model_id, Model.id).where(col(Model.model_id).in_(chunk))).all())
            missing = [mid for mid in wanted if mid not in pks]
            if missing:
                raise UnknownModelError(f"unknown model '{missing[0]}' (see: board_ops.py list_models)")
            for e in rows:
                if e.stage is not None:
                    check_stage(e.stage)
            now = now_iso()
            if rows:
                s.execute(
                    insert(Event),
                    [
                        {
                            "model_pk": pks[e.model_id] if e.model_id else None,
                            "stage": e.stage,
                            "kind": e.kind,
                            "message": e.message,
                            "data_json": dumps(e.data),
                            "origin": e.origin,
                            "ts": now,
                        }
                        for e in rows
                    ],
                )
        return len(rows)

    def list_events(
        self, model_id: str | None = None, after_id: int = 0, limit: int = 100, newest_first: bool = False
    ) -> list[EventRecord]:
        with self._read() as s:
            q = select(Event, Model.model_id).outerjoin(Model, col(Event.model_pk) == col(Model.id))
            if model_id:
                q = q.where(Event.model_pk == self._model_row(s, model_id).id)
            if after_id:
                q = q.where(col(Event.id) > after_id)
            q = q.order_by(col(Event.id).desc() if newest_first else col(Event.id)).limit(limit)
            return [EventRecord.of(e, mid) for e, mid in s.exec(q).all()]

    def latest_event(self, kind: str) -> EventRecord | None:
        """The newest event of one kind (e.g. the last `env_probe`), or None."""
        with self._read() as s:
            row = s.exec(
                select(Event, Model.model_id)
                .outerjoin(Model, col(Event.model_pk) == col(Model.id))
                .where(Event.kind == kind)
                .order_by(col(Event.id).desc())
                .limit(1)
            ).first()
            return EventRecord.of(*row) if row else None

    def events_of_kind(self, kind: str, model_id: str | None = None, limit: int = 1000) -> list[EventRecord]:
        """Events of one kind, newest first, optionally for one model (e.g. `agent_run`)."""
        with self._read() as s:
            q = (
                select(Event, Model.model_id)
                .outerjoin(Model, col(Event.model_pk) == col(Model.id))
                .where(Event.kind == kind)
            )
            if model_id:
                q = q.where(Event.model_pk == self._model_row(s, model_id).id)
            q = q.order_by(col(Event.id).desc()).limit(limit)
            return [EventRecord.of(e, mid) for e, mid in s.exec(q).all()]

    # ------------------------------------------------------------------ metrics
    # Figures are written only by complete_task (a passing gate, under the fencing token).

    def get_stack(self, stack_id: str) -> dict[str, Any] | None:
        """The recorded stack of an id (None when unknown)."""
        with self._read() as s:
            row = s.get(Stack, stack_id)
            return loads(row.data_json, {}) if row else None

    def list_stacks(self) -> dict[str, dict[str, Any]]:
        with self._read() as s:
            return {row.stack_id: loads(row.data_json, {}) for row in s.exec(select(Stack).order_by(Stack.first_seen))}

    def list_metrics(self, model_id: str | None = None, stage: str | None = None) -> list[MetricRecord]:
        with self._read() as s:
            q = select(Metric, Model.model_id).join(Model, col(Metric.model_pk) == col(Model.id))
            if model_id:
                q = q.where(Metric.model_pk == self._model_row(s, model_id).id)
            if stage:
                q = q.where(Metric.stage == check_stage(stage))
            return [MetricRecord.of(m, mid) for m, mid in s.exec(q.order_by(col(Metric.id))).all()]

    # ------------------------------------------------------------------ export
    def export(self) -> dict[str, Any]:
        """Everything on the board as plain JSON-able data, read in one transaction (one snapshot:
        writers that commit meanwhile are not half in it)."""
        with self.snapshot(), self._read() as s:
            version = s.exec(select(func.max(Event.id))).first()
            return self._export_rows(version)

    def _export_rows(self, version: int | None) -> dict[str, Any]:
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
            "host_acceptance": [r.model_dump() for r in self.host_acceptances()],
            "guidance": [g.model_dump() for g in self.list_guidance()],
            "metrics": [x.model_dump() for x in self.list_metrics()],
            "stacks": self.list_stacks(),
            "events": [e.model_dump() for e in self.list_events(limit=10**9)],
        }
