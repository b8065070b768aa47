"""The board in the Prometheus text exposition format (version 0.0.4) for /metrics."""

from __future__ import annotations

from typing import Any

from ascendbridge.stages import STAGES, STATUSES

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _line(name: str, labels: dict[str, str], value: float) -> str:
    inner = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
    return f"{name}{{{inner}}} {value:g}" if inner else f"{name} {value:g}"


def render(counts: dict[str, Any]) -> str:
    """Every stage x status series is present (zero included) so dashboards see stable series."""
    out: list[str] = []

    def metric(name: str, kind: str, help_text: str) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")

    metric("ascendbridge_models", "gauge", "Models registered on the board.")
    out.append(_line("ascendbridge_models", {}, counts["models"]))

    metric("ascendbridge_tasks", "gauge", "Stage tasks per stage and status.")
    tasks = {(stage, status): n for stage, status, n in counts["tasks"]}
    for stage in STAGES:
        for status in STATUSES:
            out.append(_line("ascendbridge_tasks", {"stage": stage, "status": status}, tasks.get((stage, status), 0)))

    metric("ascendbridge_attempts_total", "counter", "Stage attempts per stage and outcome.")
    for stage, outcome, n, _ in counts["attempts"]:
        out.append(_line("ascendbridge_attempts_total", {"stage": stage, "outcome": outcome}, n))

    metric("ascendbridge_attempt_duration_seconds", "summary", "Wall time of finished attempts per stage.")
    per_stage: dict[str, tuple[int, float]] = {}
    for stage, outcome, n, seconds in counts["attempts"]:
        if outcome == "running":
            continue
        c, s = per_stage.get(stage, (0, 0.0))
        per_stage[stage] = (c + n, s + seconds)
    for stage in STAGES:
        c, s = per_stage.get(stage, (0, 0.0))
        out.append(_line("ascendbridge_attempt_duration_seconds_sum", {"stage": stage}, s))
        out.append(_line("ascendbridge_attempt_duration_seconds_count", {"stage": stage}, c))

    metric("ascendbridge_agents", "gauge", "Agents per status.")
    for status, n in counts["agents"]:
        out.append(_line("ascendbridge_agents", {"status": status}, n))

    metric("ascendbridge_guidance", "gauge", "Guidance items per state.")
    for state, n in counts["guidance"]:
        out.append(_line("ascendbridge_guidance", {"state": state}, n))

    metric("ascendbridge_last_event_id", "counter", "Id of the newest board event (grows with every change).")
    out.append(_line("ascendbridge_last_event_id", {}, counts["last_event_id"]))
    return "\n".join(out) + "\n"
