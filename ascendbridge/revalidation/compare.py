"""Compare a re-run's figures with an adaptation's recorded baseline: one verdict per package.

The rule is optimum-habana's CI rule: accuracy must still pass, and latency or throughput worse
than a tolerance (default 5 %) is a regression; better than the tolerance is an improvement. The
latency compared is the fastest call where both runs recorded it: load only adds time, so the
fastest of a run's calls is what the host's load moves least (two idle runs of one package on one
stack, ten calls each: median +8.2 %, fastest +1.6 %). Figures recorded before the fastest call was
stored are compared as before, by median latency and the throughput derived from it.
Pure functions on board metrics, so the verdicts can be re-derived from the report alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

DEFAULT_TOLERANCE = 0.05
VERDICTS: tuple[str, ...] = ("unchanged", "improved", "regressed", "broken")
# figure -> True when a higher value is better
FIGURES: dict[str, bool] = {"min_ms": False, "median_ms": False, "samples_per_s": True}
FASTEST = "min_ms"  # compared alone where both runs have it, else the others


@dataclass
class FigureChange:
    dtype: str
    name: str
    baseline: float
    current: float

    @property
    def ratio(self) -> float:
        return self.current / self.baseline if self.baseline else float("inf")

    def worse_by(self) -> float:
        """How much worse (fraction; negative = better): slower latency or lower throughput."""
        return (1.0 / self.ratio - 1.0) if FIGURES[self.name] else (self.ratio - 1.0)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": round(self.ratio, 4), "worse_by": round(self.worse_by(), 4)}


@dataclass
class Verdict:
    """One package's re-validation outcome."""

    model_id: str
    adaptation: str
    verdict: str
    summary: str
    changes: list[FigureChange] = field(default_factory=list)
    failure: str | None = None
    baseline_stack: str | None = None
    current_stack: str | None = None

    @property
    def worst(self) -> FigureChange | None:
        return max(self.changes, key=lambda c: c.worse_by(), default=None)

    def as_dict(self) -> dict[str, Any]:
        worst = self.worst
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "changes"}
        worst_worse_by = round(worst.worse_by(), 4) if worst else None
        return {**own, "worst_worse_by": worst_worse_by, "changes": [c.as_dict() for c in self.changes]}


def latest_figures(metrics: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """dtype -> {figure name: value, ..., "stack_id", "device"} from board MetricRecords (last wins)."""
    out: dict[str, dict[str, Any]] = {}
    for m in metrics:
        row = out.setdefault(m.dtype, {})
        row[m.name] = m.value
        row["stack_id"], row["device"] = m.stack_id, m.device
    return out


def compare(
    model_id: str,
    adaptation: str,
    baseline: dict[str, dict[str, Any]],
    current: dict[str, dict[str, Any]],
    tolerance: float = DEFAULT_TOLERANCE,
) -> Verdict:
    """The verdict for one package from baseline and current figures (latest_figures shape)."""
    base_stack = next((row.get("stack_id") for row in baseline.values() if row.get("stack_id")), None)
    cur_stack = next((row.get("stack_id") for row in current.values() if row.get("stack_id")), None)
    verdict = Verdict(model_id, adaptation, "unchanged", "", baseline_stack=base_stack, current_stack=cur_stack)
    missing = [d for d in baseline if d not in current]
    if missing:
        verdict.verdict, verdict.failure = "broken", f"no re-run figures for {', '.join(missing)}"
        verdict.summary = verdict.failure
        return verdict
    failed = [d for d in baseline if current[d].get("accuracy_pass") != 1.0]
    for dtype, row in baseline.items():
        both = [n for n in FIGURES if isinstance(row.get(n), float) and isinstance(current[dtype].get(n), float)]
        for name in [FASTEST] if FASTEST in both else [n for n in both if n != FASTEST]:
            if row[name] > 0:
                verdict.changes.append(FigureChange(dtype, name, row[name], current[dtype][name]))
    worst = verdict.worst
    best = min(verdict.changes, key=lambda c: c.worse_by(), default=None)
    if failed:
        verdict.verdict = "regressed"
        verdict.summary = f"accuracy no longer passes ({', '.join(failed)})"
    elif worst is not None and worst.worse_by() > tolerance:
        verdict.verdict = "regressed"
        verdict.summary = (
            f"{worst.dtype} {worst.name} {worst.worse_by():+.1%} worse ({worst.baseline:.4g} -> {worst.current:.4g})"
        )
    elif best is not None and best.worse_by() < -tolerance:
        verdict.verdict = "improved"
        verdict.summary = (
            f"{best.dtype} {best.name} {-best.worse_by():.1%} better ({best.baseline:.4g} -> {best.current:.4g})"
        )
    else:
        spread = max((abs(c.worse_by()) for c in verdict.changes), default=0.0)
        verdict.summary = f"within {tolerance:.0%} (largest change {spread:.1%})"
    return verdict


def broken(model_id: str, adaptation: str, failure: str, baseline_stack: str | None = None) -> Verdict:
    return Verdict(model_id, adaptation, "broken", f"broken: {failure}", failure=failure, baseline_stack=baseline_stack)
