"""Plain read models the store hands out (decoded JSON, joined names), so callers never see SQL."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Optional

from pydantic import BaseModel, Field

from ascendbridge.board.schema import Agent, Attempt, Event, Guidance, HostDevice, Metric, Model, Task


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="microseconds")


def now_iso() -> str:
    return iso(utcnow())


def loads(raw: Optional[str], default: Any = None) -> Any:
    if raw is None or raw == "":
        return default
    return json.loads(raw)


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class ModelRecord(BaseModel):
    pk: int
    model_id: str
    source: str
    url: Optional[str] = None
    path: Optional[str] = None
    revision: Optional[str] = None
    description: str = ""
    adaptation_name: str
    priority: int = 0
    allow_remote_code: bool = False
    skip_stages: list[str] = Field(default_factory=list)
    paused: bool = False
    env_mode: str = ""
    env_python: Optional[str] = None
    architecture: Optional[str] = None
    model_type: Optional[str] = None
    task_family: Optional[str] = None
    parameter_count: Optional[int] = None
    dtype: Optional[str] = None
    size_bytes: Optional[int] = None
    license: Optional[str] = None
    gated: Optional[bool] = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: str

    @classmethod
    def of(cls, row: Model) -> "ModelRecord":
        data = row.model_dump(exclude={"id", "skip_stages_json", "metadata_json"})
        return cls(
            pk=row.id,
            skip_stages=loads(row.skip_stages_json, []),
            metadata=loads(row.metadata_json, {}),
            **data,
        )


class TaskRecord(BaseModel):
    id: int
    model_pk: int
    model_id: str
    adaptation_name: str
    priority: int
    stage: str
    status: str
    attempts: int
    owner: Optional[str] = None
    lease_expires_at: Optional[str] = None
    fencing_token: int
    started_at: Optional[str] = None
    finished_at: Optional[str] = None
    result: Optional[dict[str, Any]] = None
    diagnosis: Optional[dict[str, Any]] = None
    updated_at: str

    @classmethod
    def of(cls, task: Task, model: Model) -> "TaskRecord":
        data = task.model_dump(
            exclude={"result_json", "diagnosis_json", "stage_order", "model_pk", "id"}
        )
        return cls(
            id=task.id,
            model_pk=model.id,
            model_id=model.model_id,
            adaptation_name=model.adaptation_name,
            priority=model.priority,
            result=loads(task.result_json),
            diagnosis=loads(task.diagnosis_json),
            **data,
        )


class AttemptRecord(BaseModel):
    id: int
    task_id: int
    number: int
    fencing_token: int
    command: str
    exit_code: Optional[int] = None
    duration_s: Optional[float] = None
    log_path: Optional[str] = None
    agent_backend: str
    fix_applied: Optional[str] = None
    outcome: Optional[str] = None
    diagnosis: Optional[dict[str, Any]] = None
    started_at: str
    finished_at: Optional[str] = None
    host: Optional[str] = None
    devices: str = ""

    @classmethod
    def of(cls, row: Attempt) -> "AttemptRecord":
        return cls(diagnosis=loads(row.diagnosis_json), **row.model_dump(exclude={"diagnosis_json"}))


class EventRecord(BaseModel):
    id: int
    model_id: Optional[str] = None
    stage: Optional[str] = None
    kind: str
    message: str
    data: dict[str, Any] = Field(default_factory=dict)
    origin: str
    ts: str

    @classmethod
    def of(cls, row: Event, model_id: Optional[str]) -> "EventRecord":
        return cls(
            id=row.id,
            model_id=model_id,
            stage=row.stage,
            kind=row.kind,
            message=row.message,
            data=loads(row.data_json, {}),
            origin=row.origin,
            ts=row.ts,
        )


class GuidanceRecord(BaseModel):
    id: int
    model_id: Optional[str] = None
    text: str
    origin: str
    state: str
    reply: Optional[str] = None
    created_at: str
    replied_at: Optional[str] = None

    @classmethod
    def of(cls, row: Guidance, model_id: Optional[str]) -> "GuidanceRecord":
        return cls(model_id=model_id, **row.model_dump(exclude={"model_pk"}))


class AgentRecord(BaseModel):
    id: str
    role: str
    pid: Optional[int] = None
    host: Optional[str] = None
    status: str
    current_task_id: Optional[int] = None
    last_heartbeat: str
    started_at: str

    @classmethod
    def of(cls, row: Agent) -> "AgentRecord":
        return cls(**row.model_dump())


class HostDeviceRecord(BaseModel):
    host: str
    kind: str
    index: int
    name: str = ""
    memory_gb: Optional[float] = None
    cpus: list[int] = Field(default_factory=list)
    source: str = ""
    seen_at: str

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.index}" if self.kind != "cpu" else "cpu"

    @classmethod
    def of(cls, row: HostDevice) -> "HostDeviceRecord":
        return cls(cpus=loads(row.cpus_json) or [], **row.model_dump(exclude={"cpus_json"}))


class MetricRecord(BaseModel):
    model_id: str
    stage: str
    device: str
    dtype: str
    name: str
    value: float
    unit: str
    stack_id: str = ""
    ts: str

    @classmethod
    def of(cls, row: Metric, model_id: str) -> "MetricRecord":
        return cls(model_id=model_id, **row.model_dump(exclude={"id", "model_pk"}))


class Registration(BaseModel):
    """What a user asks to register; validated before anything touches the board."""

    model_id: str
    source: str = "huggingface"
    url: Optional[str] = None
    path: Optional[str] = None
    revision: Optional[str] = None
    description: str = ""
    priority: int = 0
    allow_remote_code: bool = False
    skip_stages: list[str] = Field(default_factory=list)
