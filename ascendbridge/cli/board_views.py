"""How board records read in a terminal: shared by board_ops and any other CLI that lists tasks."""

from __future__ import annotations

import json
from typing import Any

from ascendbridge.board import EventRecord, ModelRecord, TaskRecord
from ascendbridge.cli.output import Output
from ascendbridge.stages import DONE_STATUSES, STAGES

MODEL_FIELDS = (
    "model_id",
    "adaptation_name",
    "source",
    "url",
    "path",
    "revision",
    "description",
    "priority",
    "paused",
    "allow_remote_code",
    "skip_stages",
    "training",
    "proxy_depth",
    "architecture",
    "model_type",
    "task_family",
    "parameter_count",
    "dtype",
    "size_bytes",
    "license",
    "gated",
    "created_at",
)


def diagnosis_summary(diagnosis: dict[str, Any] | None, width: int = 100) -> str:
    """The one thing a person needs from a diagnosis: its summary, else a compact dump."""
    if not diagnosis:
        return ""
    for key in ("summary", "reason", "category", "message"):
        if diagnosis.get(key):
            text = str(diagnosis[key])
            break
    else:
        text = json.dumps(diagnosis, sort_keys=True, default=str)
    return text if len(text) <= width else text[: width - 3] + "..."


def current_stage(statuses: dict[str, str]) -> str:
    """'stage: status' of the first stage (in pipeline order) not yet done, or 'done'."""
    for stage in STAGES:
        status = statuses.get(stage)
        if status is not None and status not in DONE_STATUSES:
            return f"{stage}: {status}"
    return "done"


def model_table(out: Output, models: list[ModelRecord], statuses: dict[str, dict[str, str]]) -> None:
    out.table(
        "models",
        ("model", "name", "source", "prio", "paused", "family", "progress"),
        (
            (
                m.model_id,
                m.adaptation_name,
                m.source,
                m.priority,
                m.paused,
                m.task_family,
                current_stage(statuses.get(m.model_id, {})),
            )
            for m in models
        ),
    )


def task_table(out: Output, title: str, tasks: list[TaskRecord]) -> None:
    out.table(
        title,
        ("task", "model", "prio", "status", "attempts", "owner", "lease expires", "updated", "diagnosis"),
        (
            (
                t.id,
                t.model_id,
                t.priority,
                t.status,
                t.attempts,
                t.owner,
                t.lease_expires_at,
                t.updated_at,
                diagnosis_summary(t.diagnosis, 60),
            )
            for t in tasks
        ),
        detail=("owner", "lease expires"),
    )


def event_line(event: EventRecord) -> str:
    where = " ".join(x for x in (event.model_id, event.stage) if x)
    return f"{event.ts}  #{event.id}  {event.kind:<14} {where + ': ' if where else ''}{event.message}"
