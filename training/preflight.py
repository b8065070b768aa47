"""The training stage's preflight: accept the host before a long job trusts it (docs/training.md,
"Host acceptance").

Once per host and stack: the package's interpreter measures the device (ab_runtime/host_acceptance.py:
GEMM per dtype, memory bandwidth, host-to-device copy, and all-reduce when the job has several
processes), the framework judges each figure against its expectation (ascendbridge/hostcheck/) and
the stage proposes the record as a `host_acceptance` event, which the team lead stores with the
attempt (ascendbridge/board/acceptance.py): the next attempt on this host and stack reads it back
instead of measuring again. A figure under `acceptance_min_ratio` x its expectation is a
`host_acceptance_warning` event on every attempt; with `host_acceptance=refuse`, a job of at least
`acceptance_long_steps` steps is refused with the figures (`host_below_expectation`, not retried).
A measurement that fails is a warning, never a stop: the job runs as it did before this check.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ab_runtime.result import read_result
from ascendbridge.board.acceptance import ACCEPTANCE_EVENT, WARNING_EVENT
from ascendbridge.board.records import HostAcceptanceRecord, now_iso
from ascendbridge.hostcheck.expectations import expectation_for
from ascendbridge.hostcheck.judge import BELOW, judge, summary
from ascendbridge.package import uv_env
from ascendbridge.stage_api import AgentEvent, StageContext, StageOutcome, failed
from ascendbridge.workers.process import CommandResult
from training.settings import TrainingSettings

MEASURE_TIMEOUT_S = 600.0

Measure = Callable[[], dict[str, Any]]  # the measurement's RESULT (ab_runtime.host_acceptance), or raises


class MeasureError(RuntimeError):
    """The measurement did not produce figures."""


@dataclass
class Preflight:
    """What the preflight proposes: events for the board and, on a refused host, the stage's outcome."""

    events: list[AgentEvent] = field(default_factory=list)
    refusal: StageOutcome | None = None
    judged: dict[str, Any] | None = None


def measure_command(device: str, budget_s: float, allreduce: bool) -> list[str]:
    """The interpreter's arguments of the measurement (the stage and the command by hand run the same)."""
    return [
        "-m",
        "ab_runtime.host_acceptance",
        "--device",
        device,
        "--budget-s",
        str(budget_s),
        *(["--allreduce"] if allreduce else []),
    ]


def measurement_of(command: CommandResult) -> dict[str, Any]:
    """The measurement's RESULT, or MeasureError with its error."""
    result = read_result(command.output) or {}
    if not (command.ok and result.get("ok")):
        raise MeasureError(result.get("error") or f"exit {command.exit_code}: {command.tail(3)}")
    return result


def package_measure(directory: Path, settings: TrainingSettings, processes: int, env: dict[str, str]) -> Measure:
    """The measurement in the package's synced environment, on the stage's device; all-reduce only for a
    job of several processes (the collectives it will use)."""
    argv = measure_command(settings.device, settings.acceptance_budget_s, processes > 1)
    return lambda: measurement_of(uv_env.run_in_env(directory, argv, timeout_s=MEASURE_TIMEOUT_S, env=env))


def cached_records(ctx: StageContext, host: str) -> list[HostAcceptanceRecord]:
    """This host's records on the board, oldest first ([] where the board is not here, a Ray node)."""
    reader = ctx.read_board()
    if reader is None:
        return []
    try:
        return reader.host_acceptances(host)
    finally:
        reader.close()


def baseline_of(records: list[HostAcceptanceRecord], device_name: str) -> dict[str, Any] | None:
    """This host's first acceptance on a device of this name, {"measured_at", "measurement"} (None: none
    yet). Each record keeps the baseline it was judged against, so measuring a stack again (`--fresh`,
    which replaces its record) never loses the host's first figures."""
    kept = [
        r.data.get("baseline") or {"measured_at": r.measured_at, "measurement": r.data.get("measurement") or {}}
        for r in records
        if r.device_name == device_name
    ]
    return min(kept, key=lambda b: str(b["measured_at"])) if kept else None


def accept(
    records: list[HostAcceptanceRecord],
    host: str,
    stack_id: str,
    measure: Measure,
    min_ratio: float,
    fresh: bool = False,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """This host's judged acceptance on this stack, and the record to store when it was measured now
    (None when the board's record was reused; `fresh` measures again whatever the board holds)."""
    cached = None if fresh else next((r for r in records if r.stack_id == stack_id), None)
    measurement = dict(cached.data.get("measurement") or {}) if cached else measure()
    device = measurement.get("device") or {}
    row = expectation_for(str(device.get("kind") or ""), str(device.get("name") or ""))
    now = now_iso()
    baseline = baseline_of(records, str(device.get("name") or "")) or {"measured_at": now, "measurement": measurement}
    judged = judge(measurement, row, baseline["measurement"], min_ratio)
    if cached is not None:
        return judged, None
    record = {
        "host": host,
        "stack_id": stack_id,
        "measured_at": now,
        "measurement": measurement,
        "judged": judged,
        "baseline": baseline,
    }
    return judged, record


def table_lines(judged: dict[str, Any]) -> list[str]:
    """The table people read, one figure a line: measured (median, slowest), expected, source, ratio;
    headed by the host's load while it was measured (what a low figure on a shared host first means)."""
    load = judged.get("load_average") or ["?"]
    lines = [
        f"host acceptance ({judged['device']}, load {load[0]} on {judged.get('cpus') or '?'} cores), "
        f"warning below {judged['min_ratio']:g} x expected:"
    ]
    for r in judged["rows"]:
        if r["measured"] is None:
            lines.append(f"  {r['label']:<36} {r['note']}")
            continue
        expected = f"{r['expected']:g}" if r["expected"] is not None else "-"
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        spread = f"(median {r['median']:g}, slowest {r['low']:g})" if r["median"] is not None else ""
        lines.append(
            f"  {r['label']:<36} {r['measured']:>10g} {r['unit']:<8} {spread}"
            f"  expected {expected}  ratio {ratio}{'  BELOW' if r['below'] else ''}  [{r['source']}]"
        )
    if judged.get("source_url"):
        lines.append(f"  datasheet: {judged['source_url']}")
    lines.append(summary(judged))
    return lines


def preflight(
    ctx: StageContext, settings: TrainingSettings, steps: int, stack: Callable[[], str], measure: Measure
) -> Preflight:
    """The stage's host acceptance for a job of `steps` steps; `stack()` names the package's stack."""
    if settings.host_acceptance == "off":
        return Preflight()
    host = socket.gethostname()
    try:
        stack_id = stack()
        judged, record = accept(cached_records(ctx, host), host, stack_id, measure, settings.acceptance_min_ratio)
    except Exception as exc:  # the stack probe, the measurement's process, its device: never a stop for the job
        message = f"host acceptance of {host} could not measure: {exc}"
        ctx.say(message)
        return Preflight([AgentEvent(WARNING_EVENT, message, {"host": host})])
    ctx.say("measured now" if record else "from the board (this host and stack were measured before)")
    for line in table_lines(judged):
        ctx.say(line)
    events = [AgentEvent(ACCEPTANCE_EVENT, f"{host}: {summary(judged)}", record)] if record else []
    if judged["verdict"] != BELOW:
        return Preflight(events, judged=judged)
    below = [r for r in judged["rows"] if r["below"]]
    data = {"host": host, "stack_id": stack_id, "below": below}
    events.append(AgentEvent(WARNING_EVENT, f"{host}: {summary(judged)}", data))
    if settings.host_acceptance != "refuse" or steps < settings.acceptance_long_steps:
        return Preflight(events, judged=judged)
    summary_line = f"{host} refused for a {steps}-step job: {summary(judged)}"
    refusal = failed(summary_line, "host_below_expectation", retryable=False, **data)
    return Preflight(events, with_events(refusal, events), judged)


def with_events(outcome: StageOutcome, events: list[AgentEvent]) -> StageOutcome:
    """The outcome carrying the preflight's events first, for the team lead to write with its verdict."""
    return dataclasses.replace(outcome, events=[*events, *outcome.events])
