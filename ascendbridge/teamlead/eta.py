"""The team lead's ETA: per-stage medians of completed attempts, applied to the work left.

A single median over every task (discovery takes seconds, benchmark minutes) was far off, and an
estimate recomputed only when a task completed froze between completions. Here each stage's
typical cost is the median of its completed attempts on the board (this run and earlier ones),
every unfinished task of a stage costs that median (a running one: what is left of it, given how
long it has run), and a stage's work is divided by how many of its tasks run at once
(`concurrency`: the workers, but for a timed stage never more than the pool's timed slots, since a
timed task waits for a device of its own). The estimate carries its basis, so a reader can tell a
guess from one sample from a figure over many.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from ascendbridge.board import TaskRecord
from ascendbridge.runtime.placement import is_timed
from ascendbridge.stages import TERMINAL_STATUSES


@dataclass(frozen=True)
class StageBasis:
    """What one stage contributes: its median, how many samples it rests on, the work left."""

    stage: str
    median_s: float | None
    samples: int
    left: int  # unfinished tasks of this stage (pending, waiting or running)


@dataclass(frozen=True)
class Eta:
    seconds: float | None  # None: nothing measured yet for any stage with work left
    stages: list[StageBasis] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        """Some stage with work left has no completed attempt yet: the ETA is a lower bound."""
        return any(b.left and b.median_s is None for b in self.stages)

    def basis(self) -> str:
        """e.g. 'discovery 3s x1 (n=4), healing ? x2 (no sample yet)': per stage with work left."""
        parts = []
        for b in self.stages:
            if not b.left:
                continue
            if b.median_s is None:
                parts.append(f"{b.stage} ? x{b.left} (no sample yet)")
            else:
                parts.append(f"{b.stage} {fmt_s(b.median_s)} x{b.left} (median of {b.samples})")
        return ", ".join(parts)

    def text(self) -> str:
        """'ETA 4m10s [basis]', '>= 4m10s' when a stage is still unmeasured, '?' when none is."""
        if not any(b.left for b in self.stages):
            return "ETA 0s"
        if self.seconds is None:
            return f"ETA ? [{self.basis()}]"
        return f"ETA {'>=' if self.partial else ''}{fmt_s(self.seconds)} [{self.basis()}]"


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def _running_for(task: TaskRecord, now: datetime) -> float:
    if not task.started_at:
        return 0.0
    try:
        started = datetime.fromisoformat(task.started_at)
    except ValueError:
        return 0.0
    if started.tzinfo is None and now.tzinfo is not None:
        started = started.replace(tzinfo=now.tzinfo)
    return max(0.0, (now - started).total_seconds())


def concurrency(stages: Iterable[str], workers: int, limits: Mapping[str, int], timed_slots: int) -> dict[str, int]:
    """Tasks of each stage that run at once: --workers and the stage's cap (`limits`, default
    --workers); a timed stage also needs a device (or a CPU core group) of its own, so at most the
    pool's `timed_slots` run together, whatever --workers says."""
    out = {}
    for stage in stages:
        n = min(workers, limits.get(stage, workers))
        out[stage] = max(1, min(n, timed_slots) if is_timed(stage) else n)
    return out


def estimate(
    tasks: Iterable[TaskRecord],
    stages: Iterable[str],
    durations: Mapping[str, list[float]],
    workers: Mapping[str, int],
    now: datetime,
) -> Eta:
    """The time left for the unfinished tasks of `stages`, from `durations` (stage -> completed
    attempt durations) and `workers` (stage -> concurrency)."""
    order = list(stages)
    left: dict[str, list[TaskRecord]] = {stage: [] for stage in order}
    for task in tasks:
        if task.stage in left and task.status not in TERMINAL_STATUSES:
            left[task.stage].append(task)
    total: float | None = None
    basis = []
    for stage in order:
        samples = durations.get(stage, [])
        median = statistics.median(samples) if samples else None
        basis.append(StageBasis(stage, median, len(samples), len(left[stage])))
        if median is None or not left[stage]:
            continue
        work = sum(max(0.0, median - _running_for(t, now)) if t.status == "in_progress" else median
                   for t in left[stage])
        total = (total or 0.0) + work / max(1, workers.get(stage, 1))
    return Eta(total, basis)
