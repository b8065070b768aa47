"""Slot time per stage and per model, and the cost profiles summed per stage, from a board's
attempts: what `bench/evidence_cost.py` and the main job's summary print (docs/evidence.md,
"Where an attempt's time went").

A slot is one of the team lead's worker slots: it runs one attempt (the stage's run, then its
gate) at a time, so an attempt holds its slot for its whole duration, and a board's slot-minutes
are its attempts' durations summed, gate re-checks included: the work done, whatever the run's
wall time with several slots busy at once.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ascendbridge.board import BoardStore
from ascendbridge.stages import STAGES


@dataclass(frozen=True)
class AttemptCost:
    """One attempt's share of the work: its duration (0 while unfinished), where its time went
    (None: recorded before board version 9, or not measured) and its peak resident memory."""

    model_id: str
    stage: str
    duration_s: float
    profile: dict[str, float] | None = None
    peak_rss_bytes: int | None = None


def attempt_costs(store: BoardStore) -> list[AttemptCost]:
    """Every attempt of every model on the board."""
    return [
        AttemptCost(model.model_id, stage, a.duration_s or 0.0, a.cost_profile, a.peak_rss_bytes)
        for model in store.list_models()
        for stage, a in store.list_attempts(model.model_id)
    ]


def _order(stage: str) -> tuple[int, str]:
    return (STAGES.index(stage) if stage in STAGES else len(STAGES), stage)


def slot_seconds(costs: Iterable[AttemptCost], key: Callable[[AttemptCost], str]) -> dict[str, float]:
    """Seconds of slot time per `key` (the stage, the model), largest first."""
    out: dict[str, float] = defaultdict(float)
    for c in costs:
        out[key(c)] += c.duration_s
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def by_stage(costs: Iterable[AttemptCost]) -> dict[str, float]:
    """Seconds of slot time per stage, in pipeline order."""
    return dict(sorted(slot_seconds(costs, lambda c: c.stage).items(), key=lambda kv: _order(kv[0])))


def median_per_model(costs: Iterable[AttemptCost]) -> dict[str, float]:
    """Per stage, the median over models of a model's slot seconds in it (all its attempts)."""
    per: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for c in costs:
        per[c.stage][c.model_id] += c.duration_s
    return {stage: statistics.median(models.values()) for stage, models in per.items()}


def stage_profiles(costs: Iterable[AttemptCost]) -> dict[str, dict[str, float]]:
    """Per stage (pipeline order), its profiled attempts' phases summed, largest first."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for c in costs:
        for name, seconds in (c.profile or {}).items():
            out[c.stage][name] += seconds
    return {
        stage: dict(sorted(out[stage].items(), key=lambda kv: (-kv[1], kv[0]))) for stage in sorted(out, key=_order)
    }


@dataclass(frozen=True)
class Share:
    """One phase of a profile: its seconds and its percent of the profile's whole."""

    phase: str
    seconds: float
    percent: float


def shares(profile: dict[str, float]) -> list[Share]:
    """A profile's phases, largest first, each with its share of the total."""
    total = sum(profile.values())
    return [
        Share(name, s, 100 * s / total if total else 0.0)
        for name, s in sorted(profile.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def summary_line(costs: list[AttemptCost], board: str) -> str | None:
    """One line for the main job's summary: the work done, its largest stages, and the bench that
    shows where the time went; None without attempts."""
    stages = slot_seconds(costs, lambda c: c.stage)
    if not stages:
        return None
    top = ", ".join(f"{stage} {s / 60:.1f}" for stage, s in list(stages.items())[:3])
    total = sum(stages.values()) / 60
    return f"work: {total:.1f} slot-minutes ({top}); where it went: uv run bench/evidence_cost.py {board}"
