"""Team-lead settings: which stages run, how many workers, timeouts, attempt budgets.

The run settings (workers, interruptions, gate timeout, lease, heartbeat, poll) are an
ascendbridge.settings class like every stage's: the flag, then ASCENDBRIDGE_<KEY> (so `.env` can set
it), then the default. Defaults are sized for real stages: model runs take minutes, so leases are a
minute long and heartbeats frequent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypedDict, TypeVar

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from ascendbridge.settings import FLAG_SECTIONS, HOST_SECTIONS, Settings, SettingsError, StageSettings
from ascendbridge.stage_table import stage_table
from ascendbridge.stages import STAGES, check_stage


def _prompt_modes() -> dict[str, tuple[str, ...]]:
    """Each stage's `prompt_mode` group, in pipeline order, then `all`."""
    modes: dict[str, tuple[str, ...]] = {}
    for row in stage_table():
        modes[row.prompt_mode] = (*modes.get(row.prompt_mode, ()), row.name)
    return {**modes, "all": STAGES}


# PROMPT_MODE -> stages the team lead schedules (the stage table's `prompt_mode`).
PROMPT_MODES: dict[str, tuple[str, ...]] = _prompt_modes()
# A stage's default run limit and attempt budget (its stage.toml's `timeout_s`, `attempts`).
DEFAULT_STAGE_TIMEOUT_S: dict[str, float] = {row.name: row.timeout_s for row in stage_table()}
DEFAULT_STAGE_ATTEMPTS: dict[str, int] = {row.name: row.attempts for row in stage_table()}


class RunSettings(StageSettings):
    """The team lead's own knobs that have both a flag and a variable (keys in docs/teamlead.md)."""

    model_config = SettingsConfigDict(env_prefix="ASCENDBRIDGE_")
    label = "team-lead"
    FLAGS: ClassVar[dict[str, str]] = {
        "workers": "--workers",
        "max_interruptions": "--max-interruptions",
        "gate_timeout_s": "--gate-timeout",
        "lease_s": "--lease",
        "heartbeat_s": "--heartbeat",
        "poll_s": "--poll",
        "executor": "--executor",
        "ray_address": "--ray-address",
        "devices": "--devices",
        "timed_cores": "--timed-cores",
        "gate_rechecks": "--gate-rechecks",
        "gate_recheck_s": "--gate-recheck-delay",
    }

    # Each field's description is its flag's help; the flag's help adds the variable and the default.
    workers: int = Field(2, ge=1, le=256, description="total concurrent tasks (1..256)")
    max_interruptions: int = Field(
        3, ge=1, description="attempts ended without an outcome (killed, lease lost, shutdown) before a task fails"
    )
    gate_timeout_s: float = Field(1800.0, gt=0, description="wall-clock limit (s) of a gate")
    lease_s: float = Field(60.0, gt=0, description="task lease in seconds")
    heartbeat_s: float = Field(10.0, gt=0, description="heartbeat interval in seconds (at most half the lease)")
    poll_s: float = Field(1.0, gt=0, description="idle poll interval in seconds")
    executor: Literal["local", "ray"] = Field(
        "local",
        description="where stage runs execute: local subprocesses, or Ray tasks on a cluster (needs `uv sync --extra ray`)",
    )
    ray_address: str | None = Field(
        None, description="Ray cluster to join, e.g. 10.0.0.1:6379 (unset: RAY_ADDRESS, else a new single-host one)"
    )
    devices: str | None = Field(
        None,
        description="devices for timed stages: npu:0-7, cuda:0,1 or cpu[:CORES] (unset: found with npu-smi / "
        "nvidia-smi, else this process's CPU cores)",
    )
    timed_cores: int | None = Field(
        None, ge=1, description="CPU-only host: cores each timed run gets to itself (unset: a quarter of the cores)"
    )
    gate_rechecks: int = Field(
        3,
        ge=0,
        description="re-checks of a gate that could not decide (inconclusive: the host too loaded to time), each "
        "without re-running the stage or spending an attempt, before the task fails",
    )
    gate_recheck_s: float = Field(
        60.0, gt=0, description="seconds before the first gate re-check; doubles for each next one"
    )

    @classmethod
    def shown(cls, key: str) -> str:
        return f"{key} ({cls.FLAGS[key]} or ${cls.env_names()[key]})" if key in cls.FLAGS else key

    @model_validator(mode="after")
    def _heartbeat_within_lease(self) -> RunSettings:
        if self.heartbeat_s * 2 > self.lease_s:  # a lease must survive one missed heartbeat
            raise ValueError(f"heartbeat ({self.heartbeat_s:g} s) must be at most half the lease ({self.lease_s:g} s)")
        return self


class AttemptLimits(TypedDict):
    """The bounds one attempt runs under (its run's and gate's time, lease, heartbeat, kept output),
    as the team lead's settings give them and `runtime.executor.Job` carries them."""

    timeout_s: float
    gate_timeout_s: float
    lease_s: float
    heartbeat_s: float
    output_cap: int


def _default(name: str) -> Any:
    """TeamLeadSettings' defaults are RunSettings' (one place states them)."""
    return RunSettings.model_fields[name].default


@dataclass
class TeamLeadSettings:
    stages: tuple[str, ...] = STAGES
    workers: int = _default("workers")
    stage_limits: dict[str, int] = field(default_factory=dict)  # per-stage concurrency caps
    attempt_budget: dict[str, int] = field(default_factory=dict)  # --stage-attempts
    default_attempts: int | None = None  # --attempts: every stage's budget; unset: each stage's own
    max_interruptions: int = _default(
        "max_interruptions"
    )  # attempts ended without an outcome (killed, lease lost) before `failed`
    stage_timeout_s: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_STAGE_TIMEOUT_S))
    gate_timeout_s: float = _default("gate_timeout_s")
    lease_s: float = _default("lease_s")
    heartbeat_s: float = _default("heartbeat_s")
    poll_s: float = _default("poll_s")
    executor: str = _default("executor")
    ray_address: str | None = _default("ray_address")
    devices: str | None = _default("devices")
    timed_cores: int | None = _default("timed_cores")
    gate_rechecks: int = _default("gate_rechecks")
    gate_recheck_s: float = _default("gate_recheck_s")
    output_cap: int = 4 * 1024 * 1024
    forever: bool = False
    agent_id: str = "team-lead"
    resolved: Settings | None = None  # the one settings model (env + flags + --set); None: from the environment

    def budget(self, stage: str) -> int:
        if stage in self.attempt_budget:
            return self.attempt_budget[stage]
        return self.default_attempts or DEFAULT_STAGE_ATTEMPTS[stage]

    def limit(self, stage: str) -> int:
        return self.stage_limits.get(stage, self.workers)

    def timeout(self, stage: str) -> float:
        return self.stage_timeout_s.get(stage, 3600.0)

    def attempt_limits(self, stage: str) -> AttemptLimits:
        return AttemptLimits(
            timeout_s=self.timeout(stage),
            gate_timeout_s=self.gate_timeout_s,
            lease_s=self.lease_s,
            heartbeat_s=self.heartbeat_s,
            output_cap=self.output_cap,
        )


def stages_for(mode: str | None, explicit: str | None) -> tuple[str, ...]:
    """An explicit `--stages a,b` wins over PROMPT_MODE; result is in pipeline order."""
    if explicit:
        names = [s.strip() for s in explicit.split(",") if s.strip()]
        if not names:
            raise SettingsError("--stages is empty")
        for name in names:
            try:
                check_stage(name)
            except ValueError as exc:
                raise SettingsError(str(exc)) from None
        return tuple(s for s in STAGES if s in names)
    mode = (mode or "all").strip().lower()
    if mode not in PROMPT_MODES:
        raise SettingsError(f"unknown PROMPT_MODE '{mode}' (expected one of: {', '.join(PROMPT_MODES)})")
    return PROMPT_MODES[mode]


Number = TypeVar("Number", int, float)


def parse_stage_map(raw: str | None, what: str, kind: type[Number]) -> dict[str, Number]:
    """`stage=value,stage=value` (for --stage-workers, --stage-timeout, --attempts)."""
    out: dict[str, Number] = {}
    for item in filter(None, (p.strip() for p in (raw or "").split(","))):
        name, sep, value = item.partition("=")
        try:
            check_stage(name.strip())
            parsed = kind(value)
        except ValueError:
            raise SettingsError(f"{what}: '{item}' is not 'stage={kind.__name__}'") from None
        if not sep or parsed <= 0:
            raise SettingsError(f"{what}: '{item}' needs a positive value")
        out[name.strip()] = parsed
    return out


def parse_stage_settings(items: list[str]) -> dict[str, dict[str, object]]:
    """`--set benchmark.iters=20` -> {"benchmark": {"iters": 20}}; which sections and keys exist is
    Settings.resolve's to say (an unknown one is refused there, before anything runs)."""
    out: dict[str, dict[str, object]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        stage, dot, name = key.partition(".")
        if not sep or not dot or not name:
            raise SettingsError(f"--set: '{item}' is not STAGE.KEY=VALUE")
        if stage in FLAG_SECTIONS:
            raise SettingsError(
                f"--set: '{item}': the team lead's own settings are flags ({', '.join(RunSettings.FLAGS.values())})"
            )
        if stage in HOST_SECTIONS:
            raise SettingsError(f"--set: '{item}': paths belong to each host (--board, ASCENDBRIDGE_{name.upper()})")
        try:
            value: object = json.loads(raw)
        except ValueError:
            value = raw
        out.setdefault(stage, {})[name] = value
    return out
