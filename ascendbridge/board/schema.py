"""SQLModel tables of the board: each table's columns are declared once, here.

A table's plain columns live in a `<Table>Columns` class that both the table and its read model
(ascendbridge/board/records.py) derive from; the table adds its keys and its JSON-as-TEXT
columns, the record adds the decoded values and joined names. JSON-valued columns are stored as
TEXT holding JSON; the store encodes and decodes them so the rest of the code only sees Python
values. Timestamps are UTC ISO-8601 strings.
"""

from __future__ import annotations

from sqlalchemy import Index, UniqueConstraint
from sqlmodel import Field, SQLModel

SCHEMA_VERSION = 10


class SchemaInfo(SQLModel, table=True):
    __tablename__ = "schema_info"

    key: str = Field(primary_key=True)
    value: str


class RegisteredColumns(SQLModel):
    """The columns a registration sets (records.Registration is these plus what is stored as JSON)."""

    model_id: str = Field(unique=True, index=True)
    source: str = "huggingface"  # huggingface | local | hf-cache
    url: str | None = None
    path: str | None = None
    revision: str | None = None
    description: str = ""
    priority: int = 0
    allow_remote_code: bool = False
    # Run as a reduced-depth proxy: every stage builds the same architecture with this many layers
    # (per layer stack); None: the full depth. Its figures are labelled "proxy: N of M layers".
    proxy_depth: int | None = None


class ModelColumns(RegisteredColumns):
    adaptation_name: str = Field(unique=True)
    paused: bool = False
    # Environment mode of this model's runs: "" = the team-lead run's, "locked" or "system".
    env_mode: str = ""
    env_python: str | None = None  # the system interpreter (env_mode "system")
    # Discovered metadata (filled by the discovery stage).
    architecture: str | None = None
    model_type: str | None = None
    task_family: str | None = None
    parameter_count: int | None = None
    dtype: str | None = None
    size_bytes: int | None = None
    license: str | None = None
    gated: bool | None = None
    created_at: str


class Model(ModelColumns, table=True):
    __tablename__ = "models"

    id: int | None = Field(default=None, primary_key=True)
    skip_stages_json: str = "[]"
    metadata_json: str = "{}"
    training_json: str = "{}"  # the training job it was registered with ({}: none); records.TrainingJob


class TaskColumns(SQLModel):
    stage: str
    status: str = "waiting"
    attempts: int = 0
    owner: str | None = None
    lease_expires_at: str | None = None
    fencing_token: int = 0
    started_at: str | None = None
    finished_at: str | None = None
    updated_at: str


class Task(TaskColumns, table=True):
    __tablename__ = "tasks"
    __table_args__ = (UniqueConstraint("model_pk", "stage"), Index("ix_tasks_stage_status", "stage", "status"))

    id: int | None = Field(default=None, primary_key=True)
    model_pk: int = Field(foreign_key="models.id", ondelete="CASCADE")
    stage_order: int
    result_json: str | None = None
    diagnosis_json: str | None = None


class AttemptColumns(SQLModel):
    number: int
    fencing_token: int
    command: str = ""
    exit_code: int | None = None
    duration_s: float | None = None
    log_path: str | None = None
    agent_backend: str = "builtin"
    fix_applied: str | None = None
    outcome: str | None = None
    started_at: str
    finished_at: str | None = None
    host: str | None = None  # where it ran (the team lead's host for local jobs)
    devices: str = ""  # what it held exclusively, space-separated: "npu:3 npu:4", "cpu:1,2"; "" for preparation
    # 0: the stage's run and its gate. N > 0: the N-th re-check of the gate alone, on the staging
    # copy of the attempt with the same number whose gate was `inconclusive` (no attempt spent).
    recheck: int = 0
    # The peak resident memory of the attempt's largest process (run or gate worker, or a process
    # they waited for: ascendbridge/workers/cost.py); None: not measured (an older board, Ray).
    peak_rss_bytes: int | None = None


class Attempt(AttemptColumns, table=True):
    __tablename__ = "attempts"

    id: int | None = Field(default=None, primary_key=True)
    task_id: int = Field(foreign_key="tasks.id", index=True, ondelete="CASCADE")
    diagnosis_json: str | None = None
    cost_profile_json: str | None = None  # {phase: seconds}, with "other": they sum to duration_s


class AgentColumns(SQLModel):
    id: str = Field(primary_key=True)
    role: str
    pid: int | None = None
    host: str | None = None
    status: str = "running"  # running | stopped | stale
    current_task_id: int | None = None
    last_heartbeat: str
    started_at: str


class Agent(AgentColumns, table=True):
    __tablename__ = "agents"


class EventColumns(SQLModel):
    stage: str | None = None
    kind: str
    message: str = ""
    origin: str = "system"
    ts: str


class Event(EventColumns, table=True):
    __tablename__ = "events"
    __table_args__ = (Index("ix_events_model_id", "model_pk", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    model_pk: int | None = Field(default=None, foreign_key="models.id", ondelete="CASCADE")
    data_json: str = "{}"


class GuidanceColumns(SQLModel):
    text: str
    origin: str = "cli"
    state: str = "open"  # open | applied | answered | rejected
    reply: str | None = None
    created_at: str
    replied_at: str | None = None


class Guidance(GuidanceColumns, table=True):
    __tablename__ = "guidance"

    id: int | None = Field(default=None, primary_key=True)
    model_pk: int | None = Field(default=None, foreign_key="models.id", ondelete="CASCADE")


class MetricColumns(SQLModel):
    stage: str
    device: str = ""
    dtype: str = ""
    name: str
    value: float
    unit: str = ""
    stack_id: str = ""  # the software stack the figure was measured on (stacks.stack_id)
    ts: str


class Metric(MetricColumns, table=True):
    __tablename__ = "metrics"
    __table_args__ = (Index("ix_metrics_model_stage", "model_pk", "stage"),)

    id: int | None = Field(default=None, primary_key=True)
    model_pk: int = Field(foreign_key="models.id", ondelete="CASCADE")


class Stack(SQLModel, table=True):
    """One software stack results were measured on (ascendbridge/package/stack.py probes it)."""

    __tablename__ = "stacks"

    stack_id: str = Field(primary_key=True)
    data_json: str = "{}"
    first_seen: str


class HostDeviceColumns(SQLModel):
    host: str = Field(primary_key=True)
    kind: str = Field(primary_key=True)  # npu | cuda | cpu
    index: int = Field(primary_key=True)
    name: str = ""
    memory_gb: float | None = None
    source: str = ""  # npu-smi | nvidia-smi | --devices | affinity
    seen_at: str


class HostDevice(HostDeviceColumns, table=True):
    """One device of one host as the team lead found it at start (a CPU-only host: one 'cpu' row)."""

    __tablename__ = "host_devices"

    cpus_json: str = "[]"  # the cores this host's team lead may use


class HostAcceptanceColumns(SQLModel):
    host: str = Field(primary_key=True)
    stack_id: str = Field(primary_key=True)  # the software stack it was measured with (stacks.stack_id)
    device_kind: str = ""  # npu | cuda | cpu
    device_name: str = ""  # as torch names it
    verdict: str = ""  # accepted | below (ascendbridge/hostcheck/judge.py)
    worst_ratio: float | None = None
    measured_at: str


class HostAcceptance(HostAcceptanceColumns, table=True):
    """One host's acceptance on one stack (ab_runtime/host_acceptance.py measured, hostcheck judged): the
    training preflight's cache, so a host and stack is measured once."""

    __tablename__ = "host_acceptance"

    data_json: str = (
        "{}"  # {"measurement", "judged": {"rows", "verdict", ...}, "baseline": {"measured_at", "measurement"}}
    )
