"""Plain read models the store hands out (decoded JSON, joined names), so callers never see SQL.

Each record derives from its table's column class (ascendbridge/board/schema.py), so a column is
declared once; a record adds only its decoded JSON values, its key under its own name and the
names it joins in."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from ab_runtime.spec import proxy_label
from ascendbridge.board.schema import (
    Agent,
    AgentColumns,
    Attempt,
    AttemptColumns,
    Event,
    EventColumns,
    Guidance,
    GuidanceColumns,
    HostAcceptance,
    HostAcceptanceColumns,
    HostDevice,
    HostDeviceColumns,
    Metric,
    MetricColumns,
    Model,
    ModelColumns,
    RegisteredColumns,
    Task,
    TaskColumns,
)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="microseconds")


def now_iso() -> str:
    return iso(utcnow())


def loads(raw: str | None, default: Any = None) -> Any:
    if raw is None or raw == "":
        return default
    return json.loads(raw)


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class TrainingJob(BaseModel):
    """A training job a model is registered with: its corpus (an absolute path, or an `hf:` dataset
    reference the training stage caches into the package), full or LoRA, how many global steps, and
    its world size (torchrun processes: the devices the stage claims from the team lead's pool). The
    training stage runs it; a model without one has its training skipped."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data: str
    method: Literal["full", "lora"] = "full"
    steps: int = 30
    processes: int = 1


# A record's own `metadata` field shadows SQLModel's class-level table MetaData, which no record
# uses (records are not tables); pydantic's warning about it is silenced for these classes only.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message='Field name "metadata"', category=UserWarning)

    class ModelRecord(ModelColumns):
        pk: int
        skip_stages: list[str] = Field(default_factory=list)
        # a record is no table: SQLModel's class-level MetaData means nothing here
        metadata: dict[str, Any] = Field(default_factory=dict)  # type: ignore[assignment,misc]
        training: TrainingJob | None = None

        def proxy_label(self) -> str | None:
            """`proxy: 1 of 28 layers` for a registered reduced-depth proxy (of discovery's layer count),
            the label its figures carry wherever they appear; None at the full depth."""
            if not self.proxy_depth:
                return None
            layers = self.metadata.get("num_layers")
            return proxy_label(self.proxy_depth, layers if isinstance(layers, int) else None)

        @classmethod
        def of(cls, row: Model) -> ModelRecord:
            data = row.model_dump(exclude={"id", "skip_stages_json", "metadata_json", "training_json"})
            return cls(
                pk=row.id,
                skip_stages=loads(row.skip_stages_json, []),
                metadata=loads(row.metadata_json, {}),
                training=loads(row.training_json, {}) or None,
                **data,
            )


class TaskRecord(TaskColumns):
    id: int
    model_pk: int
    model_id: str
    adaptation_name: str
    priority: int
    result: dict[str, Any] | None = None
    diagnosis: dict[str, Any] | None = None

    @classmethod
    def of(cls, task: Task, model: Model) -> TaskRecord:
        data = task.model_dump(exclude={"result_json", "diagnosis_json", "stage_order", "model_pk"})
        return cls(
            model_pk=model.id,
            result=loads(task.result_json),
            diagnosis=loads(task.diagnosis_json),
            **data,
            **model.model_dump(include={"model_id", "adaptation_name", "priority"}),
        )


class AttemptRecord(AttemptColumns):
    id: int
    task_id: int
    diagnosis: dict[str, Any] | None = None
    cost_profile: dict[str, float] | None = None  # where its time went: phase -> seconds (docs/evidence.md)

    @classmethod
    def of(cls, row: Attempt) -> AttemptRecord:
        return cls(
            diagnosis=loads(row.diagnosis_json),
            cost_profile=loads(row.cost_profile_json),
            **row.model_dump(exclude={"diagnosis_json", "cost_profile_json"}),
        )


class EventRecord(EventColumns):
    id: int
    model_id: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, row: Event, model_id: str | None) -> EventRecord:
        return cls(
            id=row.id,
            model_id=model_id,
            data=loads(row.data_json, {}),
            **row.model_dump(exclude={"id", "model_pk", "data_json"}),
        )


class GuidanceRecord(GuidanceColumns):
    id: int
    model_id: str | None = None

    @classmethod
    def of(cls, row: Guidance, model_id: str | None) -> GuidanceRecord:
        return cls(model_id=model_id, **row.model_dump(exclude={"model_pk"}))


class AgentRecord(AgentColumns):
    @classmethod
    def of(cls, row: Agent) -> AgentRecord:
        return cls(**row.model_dump())


class HostDeviceRecord(HostDeviceColumns):
    cpus: list[int] = Field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.index}" if self.kind != "cpu" else "cpu"

    @classmethod
    def of(cls, row: HostDevice) -> HostDeviceRecord:
        return cls(cpus=loads(row.cpus_json) or [], **row.model_dump(exclude={"cpus_json"}))


class HostAcceptanceRecord(HostAcceptanceColumns):
    data: dict[str, Any] = Field(default_factory=dict)  # {"measurement", "judged", "baseline"}

    @classmethod
    def of(cls, row: HostAcceptance) -> HostAcceptanceRecord:
        return cls(data=loads(row.data_json, {}), **row.model_dump(exclude={"data_json"}))


class MetricRecord(MetricColumns):
    model_id: str

    @classmethod
    def of(cls, row: Metric, model_id: str) -> MetricRecord:
        return cls(model_id=model_id, **row.model_dump(exclude={"id", "model_pk"}))


@dataclass(frozen=True)
class NewEvent:
    """An event to append (BoardStore.add_event / add_events): what happened, to which model and
    stage (None: the board as a whole), its data and who says so."""

    kind: str
    message: str
    model_id: str | None = None
    stage: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    origin: str = "system"


class EndWrites(TypedDict, total=False):
    """What ending a leased task (complete_task, fail_task) writes besides its status, in the same
    fenced transaction: who says so (default team-lead), the model's columns and metadata the
    stage found, and the attempt's agent-history events ({"kind", "message", "data", "origin"})."""

    origin: str
    model_fields: dict[str, Any] | None
    model_metadata: dict[str, Any] | None
    events: Iterable[dict[str, Any]]


class CompletionWrites(EndWrites, total=False):
    """A completion also writes the stage's gated figures ({"values", "device", "dtype", "units",
    "stack"} each)."""

    figures: Iterable[dict[str, Any]]


@dataclass(frozen=True)
class AttemptStart:
    """An attempt being started (start_attempt): the worker's command line and log, where it runs
    ({"host", "devices", "cpus", "env", "exclusive"}; None: not placed), and `recheck` N > 0 for the
    N-th re-check of the gate alone of the current attempt (same number, same token)."""

    command: str
    log_path: str
    placement: dict[str, Any] | None = None
    recheck: int = 0


@dataclass(frozen=True)
class AttemptEnd:
    """How an attempt ended (finish_attempt): its outcome, the exit code of the phase that decided
    it and the attempt's time, the diagnosis, the fix applied, the agent backends that acted in
    it ("builtin": the stage's own rules alone), and its cost: where its time went (phase ->
    seconds) and its peak resident memory (ascendbridge/workers/cost.py)."""

    outcome: str
    exit_code: int | None = None
    duration_s: float = 0.0
    diagnosis: dict[str, Any] | None = None
    fix_applied: str | None = None
    agent_backend: str = "builtin"
    cost_profile: dict[str, float] | None = None
    peak_rss_bytes: int | None = None

    def columns(self) -> dict[str, Any]:
        """The attempt row's columns it sets (all but `finished_at`)."""
        return {
            "exit_code": self.exit_code,
            "duration_s": self.duration_s,
            "outcome": self.outcome,
            "diagnosis_json": dumps(self.diagnosis) if self.diagnosis is not None else None,
            "fix_applied": self.fix_applied,
            "agent_backend": self.agent_backend,
            "cost_profile_json": dumps(self.cost_profile) if self.cost_profile is not None else None,
            "peak_rss_bytes": self.peak_rss_bytes,
        }


class Registration(RegisteredColumns):
    """What a user asks to register; validated before anything touches the board."""

    skip_stages: list[str] = Field(default_factory=list)
    # Opt-in stages (stage.toml `runs = "optional"`) this model runs; the others it skips.
    enable_stages: list[str] = Field(default_factory=list)
    training: TrainingJob | None = None
