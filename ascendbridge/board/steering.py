"""Human steering: priority, pause, remote-code policy, retry, skip, rollback and guidance.

These are the moves a person makes from the CLI or the dashboard; each is one transaction with
its event, like every other board write.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, select

from ascendbridge.board.base import StoreBase, _json_list, _pk
from ascendbridge.board.connection import BoardError
from ascendbridge.board.records import GuidanceRecord, ModelRecord, TaskRecord, dumps, loads, now_iso
from ascendbridge.board.schema import Guidance, Model, Task
from ascendbridge.stages import DONE_STATUSES, STAGES, check_stage, stage_index

GUIDANCE_STATES = ("open", "applied", "answered", "rejected")


class SteeringStore(StoreBase):
    """What a person changes on the board (CLI, dashboard); the team lead only answers guidance."""

    # ------------------------------------------------------------------ model policy
    def set_priority(self, model_id: str, priority: int, origin: str = "cli") -> ModelRecord:
        with self._write() as s:
            row = self._model_row(s, model_id)
            old = row.priority
            row.priority = priority
            s.add(row)
            self._event(
                s, "priority", f"priority {old} -> {priority}", row.id, None, {"old": old, "new": priority}, origin
            )
            return ModelRecord.of(row)

    def set_paused(self, model_id: str, paused: bool, origin: str = "cli") -> ModelRecord:
        return self._set_model_field(
            model_id,
            "paused",
            paused,
            "paused" if paused else "resumed",
            "model paused" if paused else "model resumed",
            {},
            origin,
        )

    def set_allow_remote_code(self, model_id: str, allow: bool, origin: str = "cli") -> ModelRecord:
        return self._set_model_field(
            model_id,
            "allow_remote_code",
            allow,
            "policy",
            f"allow_remote_code = {allow}",
            {"allow_remote_code": allow},
            origin,
        )

    def set_proxy_depth(self, model_id: str, depth: int | None, origin: str = "cli") -> ModelRecord:
        """Build the model as a reduced-depth proxy of `depth` layers (None: the full depth) from the
        next discovery on; the stages already run keep their figures until rolled back."""
        if depth is not None and depth < 1:
            raise BoardError(f"depth {depth} is not a layer count (a proxy builds 1 layer or more)")
        what = f"a proxy of {depth} layer(s)" if depth else "the full depth"
        return self._set_model_field(
            model_id, "proxy_depth", depth, "policy", f"proxy_depth = {depth}: {what}", {"proxy_depth": depth}, origin
        )

    def _set_model_field(
        self, model_id: str, field: str, value: Any, kind: str, message: str, data: dict[str, Any], origin: str
    ) -> ModelRecord:
        """One field of a model set by a person, with its event."""
        with self._write() as s:
            row = self._model_row(s, model_id)
            setattr(row, field, value)
            s.add(row)
            self._event(s, kind, message, row.id, None, data, origin)
            return ModelRecord.of(row)

    def set_env_mode(self, model_id: str, mode: str, python: str | None = None, origin: str = "cli") -> ModelRecord:
        """Per-model environment mode: "" (the run's), "locked", or "system" with its interpreter."""
        if mode not in ("", "locked", "system"):
            raise BoardError(f"unknown environment mode '{mode}' (expected locked or system)")
        if mode == "system" and not python:
            raise BoardError("environment mode 'system' needs the interpreter's path")
        with self._write() as s:
            row = self._model_row(s, model_id)
            row.env_mode, row.env_python = mode, (python if mode == "system" else None)
            s.add(row)
            self._event(
                s,
                "policy",
                f"environment mode = {mode or 'run default'}" + (f" ({python})" if row.env_python else ""),
                row.id,
                None,
                {"env_mode": mode, "env_python": row.env_python},
                origin,
            )
            return ModelRecord.of(row)

    # ------------------------------------------------------------------ human steering
    def retry(self, model_id: str, stage: str | None = None, origin: str = "cli") -> TaskRecord:
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
            self._task_event(
                s, target, "retry", f"{target.stage} {old} -> pending (retry requested)", {"from": old}, origin
            )
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
            task = self._task_row(s, _pk(model), stage)
            if task.status in ("in_progress", "completed"):
                raise BoardError(f"cannot skip {stage} of '{model_id}': it is {task.status}")
            old = task.status
            now = now_iso()
            task.status = "skipped"
            task.finished_at = now
            task.updated_at = now
            before = str(loads(task.diagnosis_json, {}).get("summary") or "")  # a failure's reason stays
            was = f"{old}: {before}" if before else old
            task.diagnosis_json = dumps({"rule": "skip_requested", "summary": f"on request (it was {was})"})
            s.add(task)
            skips = set(_json_list(model.skip_stages_json)) | {stage}
            model.skip_stages_json = dumps(sorted(skips))
            s.add(model)
            self._task_event(s, task, "skipped", f"{stage} {old} -> skipped (requested)", {"from": old}, origin)
            prev = self._prev_done(s, _pk(model), stage)
            if prev:
                self._advance(s, _pk(model), stage)
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
            if not self._prev_done(s, _pk(model), to_stage):
                raise BoardError(f"cannot roll '{model_id}' back to {to_stage}: its predecessor is not done")
            busy = s.exec(select(Task).where(Task.model_pk == model.id, Task.status == "in_progress")).first()
            if busy is not None:
                raise BoardError(f"cannot roll '{model_id}' back while {busy.stage} is in progress; pause it first")
            now = now_iso()
            changed = []
            skips = set(_json_list(model.skip_stages_json))
            tasks = s.exec(
                select(Task)
                .where(Task.model_pk == model.id, Task.stage_order >= stage_index(to_stage))
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
                message = f"{task.stage} {old} -> {task.status} (rollback to {to_stage})"
                self._task_event(s, task, "rollback", message, {"from": old, "to_stage": to_stage}, origin)
            skips.discard(to_stage)
            model.skip_stages_json = dumps(sorted(skips))
            s.add(model)
            return changed

    # ------------------------------------------------------------------ guidance
    def add_guidance(self, text: str, model_id: str | None = None, origin: str = "cli") -> GuidanceRecord:
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

    def list_guidance(self, model_id: str | None = None, state: str | None = None) -> list[GuidanceRecord]:
        if state and state not in GUIDANCE_STATES:
            raise BoardError(f"unknown guidance state '{state}' (expected one of: {', '.join(GUIDANCE_STATES)})")
        with self._read() as s:
            q = select(Guidance, Model.model_id).outerjoin(Model, col(Guidance.model_pk) == col(Model.id))
            if model_id:
                q = q.where(Guidance.model_pk == self._model_row(s, model_id).id)
            if state:
                q = q.where(Guidance.state == state)
            return [GuidanceRecord.of(g, mid) for g, mid in s.exec(q.order_by(col(Guidance.id))).all()]

    def reply_guidance(self, guidance_id: int, state: str, reply: str, origin: str = "team-lead") -> GuidanceRecord:
        if state not in GUIDANCE_STATES or state == "open":
            raise BoardError(f"cannot answer guidance with state '{state}'")
        with self._write() as s:
            row = self._row(s, Guidance, guidance_id, "guidance")
            row.state = state
            row.reply = reply
            row.replied_at = now_iso()
            s.add(row)
            self._event(
                s, "guidance_reply", reply[:200], row.model_pk, None, {"guidance_id": row.id, "state": state}, origin
            )
            model = s.get(Model, row.model_pk) if row.model_pk else None
            return GuidanceRecord.of(row, model.model_id if model else None)
