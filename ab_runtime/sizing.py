"""Measurement counts sized to the model: the asked counts while they fit a time budget, fewer
timed calls (never under a floor) once one call says they would not.

A tiny model's forward takes milliseconds and its ten timed calls cost nothing; a real-size model's
forward on a CPU takes seconds and a generation tens of seconds, so fixed counts cost hours. The
first warm-up call is clocked (the calibration call; it still counts as warm-up), and the timed
calls are cut to what the budget leaves after the warm-up, never under `FLOOR` (a median and a p90
over fewer calls say little) and never over what was asked. The warm-up count is never cut: the
benchmark's reference and target timings must share it (the gate checks), and it is small.

The chosen counts and why are recorded beside the samples (`sizing` in a timing block); the gate
(ascendbridge/gatekit/metrics_check.py) refuses a sized timing under its floor or whose record does
not match its samples, and `budget_ended` says when the budget, not the evidence, ended it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

FLOOR = 5  # timed calls a sized measurement keeps at least (or all it was asked for, if fewer)
BUDGET_S = 60.0  # seconds one measurement may spend by default (warm-up and timed calls together)


@dataclass(frozen=True)
class Sizing:
    """What a sized measurement ran and why (recorded as `sizing` beside its samples)."""

    asked_iterations: int
    iterations: int
    warmup: int
    call_s: float  # the calibration call: the first warm-up call, clocked
    budget_s: float
    floor: int
    budget_ended: bool
    why: str

    def record(self) -> dict[str, object]:
        return asdict(self)


def size(call_s: float, warmup: int, iterations: int, budget_s: float, floor: int = FLOOR) -> Sizing:
    """The timed calls a measurement keeps when one call takes `call_s` and it may spend `budget_s`
    on `warmup` + timed calls."""
    asked = warmup + iterations
    if asked * call_s <= budget_s:
        why = f"{asked} calls of {call_s:.3g} s fit the {budget_s:g} s budget"
        return Sizing(iterations, iterations, warmup, call_s, budget_s, floor, False, why)
    affordable = int((budget_s - warmup * call_s) / call_s) if call_s > 0 else iterations
    kept = min(iterations, max(floor, affordable))
    why = (
        f"{asked} calls of {call_s:.3g} s would take {asked * call_s:.0f} s, over the {budget_s:g} s budget: "
        f"{kept} timed calls" + (f" (the floor of {floor})" if kept == floor and affordable < floor else "")
    )
    return Sizing(iterations, kept, warmup, call_s, budget_s, floor, kept < iterations, why)


def budget_line(where: str, record: dict[str, object] | None) -> str | None:
    """One line for people when a budget, not the evidence, ended `where`'s measurement; else None."""
    if not record or not record.get("budget_ended"):
        return None
    return f"sized {where}: {record['why']}"


def check_record(where: str, record: object, iterations: object, warmup: object) -> list[str]:
    """Problems of a recorded `sizing` against the timing it sized (its iteration and warm-up counts)."""
    if not isinstance(record, dict):
        return [f"{where}: must be an object"]
    kept, asked, floor = record.get("iterations"), record.get("asked_iterations"), record.get("floor")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (kept, asked, floor)):
        return [f"{where}: iterations, asked_iterations and floor must be integers"]
    assert isinstance(kept, int) and isinstance(asked, int) and isinstance(floor, int)
    problems = []
    if kept != iterations or record.get("warmup") != warmup:
        problems.append(
            f"{where}: records {kept} timed calls after {record.get('warmup')} warm-up, the samples say "
            f"{iterations} after {warmup}"
        )
    if floor < FLOOR or kept < min(asked, floor):
        problems.append(f"{where}: {kept} timed calls, under the floor of {max(floor, FLOOR)} (asked {asked})")
    if kept > asked:
        problems.append(f"{where}: {kept} timed calls, more than the {asked} asked")
    if record.get("budget_ended") is not (kept < asked):
        problems.append(f"{where}.budget_ended must say whether fewer calls than asked were timed")
    return problems
