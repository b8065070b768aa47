"""The team lead's ETA: what each unfinished task will cost, laid out the way the team lead runs work.

Today's failure it answers: a stage with no completed attempt counted as zero, so 34 tasks of timed
stages left read `ETA >=1m19s`. Here every task has a cost. One task of stage s for a model of task
family f costs the shipped cost model's figure for (s, f) (`stage_costs.json`: medians of a real
main job; a family it has not seen gets the stage's median over all), scaled by how fast stage s
runs here. Its prior: the median of actual / cost-model over its attempts on earlier boards of
this host (teamlead/history.py); with none, the cost model scaled as this board's other stages run
against it (a busy or a faster host slows or speeds every stage), those of its own kind where one
has run: a timed stage holds its own core and compiles, and beside busy loops it slowed x7 where
the untimed stages slowed x2.4. Once the stage has costed attempts
on this board (stages.COSTED_OUTCOMES: completed, inconclusive, or skipped by the stage itself), its
factor is the median of their ratios with the prior counted as one more (in log space, so one
attempt and the prior meet at their geometric mean): one cold or odd first attempt (the first
optimization builds the host's kernels) moves the estimate half-way, two agreeing attempts decide
it. The ETA line says which one each stage rests on. A running task costs what is left of its
estimate. A stage the cost model lacks has its stage.toml `cost_s` instead.

Every figure is at the model's size (teamlead/size_prior.py): the cost model's seconds plus what
the model's parameters add over the tiny models it was measured on, by a size term fitted from
this host's attempts of known size or the shipped default; a model of unknown size (before
discovery) keeps a tiny model's figure, and the line says the ETA is then a lower bound.

The layout follows the scheduling rule (docs/teamlead.md, "Output"), not the order of the stages:
a model's stages run one after another; every free worker (--workers in all, and a stage's own cap)
takes the ready task the scheduler claims: a timed one (benchmark, optimization,
business_benchmark) while a timed slot (a device, or a core group on a CPU-only host) is free, else
an untimed one, the model the scheduler ranks first (selection.model_rank). The ETA is when that
layout ends: the longer of the timed lane and the untimed lanes beside it (with each model's order
kept), not the sum of the stages.
"""

from __future__ import annotations

import heapq
import json
import logging
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from ab_runtime.progress import fmt_s
from ascendbridge.board import ModelRecord, TaskRecord
from ascendbridge.discovery.config_estimate import built_parameters
from ascendbridge.stage_table import stage_table
from ascendbridge.stages import DONE_STATUSES, STAGES, TERMINAL_STATUSES
from ascendbridge.teamlead.selection import model_rank
from ascendbridge.teamlead.size_prior import DEFAULT, FLAT, MATTERS_S, SizedPoint, SizeTerm, fit, scaled_text
from ascendbridge.workers.placement import is_timed

COSTS_FILE = Path(__file__).with_name("stage_costs.json")
# An attempt's seconds for a stage with no figure in the cost model (stage.toml `cost_s`).
PRIORS: dict[str, float] = {row.name: row.cost_s for row in stage_table()}
# What a billion parameters add to a stage's attempt (stage.toml `size_s_per_b`; size_prior.py).
SIZE_RATES: dict[str, float] = {row.name: row.size_s_per_b for row in stage_table()}
ALL_FAMILIES = "*"  # a stage's entry in the cost model for a family it has no figure for

# What a stage's estimate rests on (StageBasis.source), best first.
BOARD, HOST, SHIPPED, NONE = "board", "host", "shipped", "none"


class Sample(NamedTuple):
    """One costed attempt (stages.COSTED_OUTCOMES): what the estimate learns from."""

    stage: str
    family: str | None
    duration_s: float
    params: int | None = None  # the model's parameter count, where discovery found it


@dataclass(frozen=True)
class CostModel:
    """Seconds one attempt of a stage takes per task family, as shipped (stage_costs.json)."""

    stages: dict[str, dict[str, float]]  # stage -> family (or ALL_FAMILIES) -> seconds
    source: dict[str, Any] = field(default_factory=dict)
    size_s: dict[str, float] = field(default_factory=dict)  # stage -> seconds 1e9 parameters add (SIZE_RATES)
    params: dict[str, int] = field(default_factory=dict)  # family (or ALL_FAMILIES) -> the size it measured
    terms: dict[str, SizeTerm] = field(default_factory=dict)  # stage -> the size term fitted here (fitted())

    def base(self, stage: str, family: str | None) -> float | None:
        per = self.stages.get(stage)
        if per is None:  # a stage this cost model has never measured: its stage.toml's prior
            return PRIORS.get(stage)
        return per.get(family or "", per.get(ALL_FAMILIES))

    def reference_params(self, family: str | None) -> int | None:
        """The size of the models the figures of `family` were measured on."""
        return self.params.get(family or "", self.params.get(ALL_FAMILIES))

    def term(self, stage: str) -> SizeTerm:
        """How the stage grows with parameters: fitted here, else the shipped default."""
        if stage in self.terms:
            return self.terms[stage]
        rate = self.size_s.get(stage, 0.0)
        return SizeTerm(rate, source=DEFAULT if rate > 0 else FLAT)

    def unit(self, stage: str, family: str | None, params: int | None) -> float | None:
        """One attempt's cost-model seconds for a model of `family` with `params` parameters (size_prior)."""
        base = self.base(stage, family)
        if base is None:
            return None
        return base + self.term(stage).extra(params, self.reference_params(family))

    def fitted(self, samples: Iterable[Sample]) -> CostModel:
        """This cost model with each stage's size term fitted from `samples` (the host's and this
        board's attempts; those of models of known size count)."""
        points: dict[str, list[SizedPoint]] = defaultdict(list)
        for s in samples:
            base = self.base(s.stage, s.family)
            if s.params and base:
                points[s.stage].append(SizedPoint(s.params, s.duration_s, base, self.reference_params(s.family)))
        terms = {stage: fit(pts, self.term(stage)) for stage, pts in points.items()}
        return CostModel(self.stages, self.source, self.size_s, self.params, terms)

    def model_work_s(self, family: str | None, skips: Iterable[str], params: int | None = None) -> float:
        """Seconds all the stages a model runs (those its policy skips left out) cost, its size term
        included (`params`: what its stages build; None: a tiny model's figure): the scheduler serves
        the longest model first (selection.model_rank), so a 0.6 B model of a batch of tiny ones starts
        first. An undiscovered model is infinite: its discovery costs seconds and tells its family
        and size, hence its true figure."""
        if family is None:
            return math.inf
        skipped = set(skips)
        return sum(self.unit(stage, family, params) or 0.0 for stage in STAGES if stage not in skipped)

    @classmethod
    def load(cls, path: Path = COSTS_FILE) -> CostModel:
        """The cost model in `path`; ValueError (one line) when it is unreadable or malformed."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            stages = {
                str(stage): {str(fam): float(s) for fam, s in per.items()} for stage, per in data["stages"].items()
            }
            params = {str(fam): int(n) for fam, n in data.get("size", {}).get("params", {}).items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"cost model {path}: {type(exc).__name__}: {exc}") from None
        if any(s <= 0 for per in stages.values() for s in per.values()):
            raise ValueError(f"cost model {path}: every figure must be positive seconds")
        if any(n <= 0 for n in params.values()):
            raise ValueError(f"cost model {path}: every size.params must be a positive parameter count")
        return cls(stages, data.get("derived_from", {}), dict(SIZE_RATES), params)

    @classmethod
    def shipped(cls, log: logging.Logger) -> CostModel:
        """The shipped cost model; a broken one is a warning, not a stopped run (no priors then, and
        every discovered model ranks alike)."""
        try:
            return cls.load()
        except ValueError as exc:
            log.warning("cost model: %s; no shipped priors in this run", exc)
            return cls({})


def model_size(model: ModelRecord) -> int | None:
    """The parameters a model's stages build: discovery's count, a registered proxy's (None: not counted yet)."""
    return built_parameters(model.parameter_count, model.metadata.get("config") or {}, model.proxy_depth)


def derive_costs(samples: Iterable[Sample]) -> dict[str, dict[str, float]]:
    """A cost model's figures: per stage, the median duration of each family's costed attempts,
    and over all of them (ALL_FAMILIES), rounded to 0.1 s."""
    by: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for sample in samples:
        by[sample.stage][sample.family or ""].append(sample.duration_s)
        by[sample.stage][ALL_FAMILIES].append(sample.duration_s)
    return {
        stage: {fam: round(statistics.median(values), 1) for fam, values in sorted(per.items())}
        for stage, per in sorted(by.items(), key=lambda kv: STAGES.index(kv[0]) if kv[0] in STAGES else 99)
    }


@dataclass(frozen=True)
class Lanes:
    """How the team lead runs work at once: --workers in all, the pool's timed slots, stage caps,
    and the idle preparation cores lent as one more timed slot (1 on a CPU-only host that lends)."""

    workers: int
    timed_slots: int
    limits: Mapping[str, int] = field(default_factory=dict)
    lendable: int = 0


@dataclass(frozen=True)
class StageBasis:
    """What one stage contributes: its tasks left, their mean estimate and what that rests on."""

    stage: str
    source: str  # BOARD: its attempts on this board; HOST / SHIPPED: a prior; NONE: nothing
    samples: int  # the attempts it rests on (SHIPPED: this board's attempts of other stages it is scaled by)
    left: int  # unfinished tasks of this stage that this run can still reach
    task_s: float | None  # a full task's estimate (mean over those tasks); None: no estimate
    factor: float | None = None  # how fast it runs here against the cost model
    with_prior: bool = False  # BOARD: the stage's prior counted as one attempt among them
    size: str = ""  # how its tasks were scaled to their models' sizes (size_prior.scaled_text)
    shipped: str = "cost model"  # SHIPPED: the cost model, or the stage.toml cost_s of a stage it lacks

    def text(self) -> str:
        if self.source == NONE:
            return f"{self.stage} ? x{self.left} (no sample, no prior)"
        assert self.task_s is not None  # every other source has one
        size = f"; {self.size}" if self.size else ""
        if self.source == BOARD:
            prior = " and its prior" if self.with_prior else ""
            return f"{self.stage} {fmt_s(self.task_s)} x{self.left} (median of {self.samples} here{prior}{size})"
        if self.source == HOST:
            prior = f"{self.samples} attempt(s) on earlier boards of this host"
        else:
            prior = f"{self.shipped} x{self.factor:.2f}, as other stages ran here" if self.samples else self.shipped
        return f"{self.stage} ~{fmt_s(self.task_s)} x{self.left} (prior: {prior}{size})"


@dataclass(frozen=True)
class Eta:
    seconds: float | None  # None: a stage with work left has no estimate at all
    stages: list[StageBasis] = field(default_factory=list)
    known_s: float = 0.0  # the layout's end with unestimated tasks counted as zero (seconds when all known)
    timed_s: float = 0.0  # timed work left (task-seconds), for the basis
    untimed_s: float = 0.0  # untimed work left (task-seconds)
    error: str | None = None  # the estimate itself failed: the line says so, the run goes on
    unsized: int = 0  # models with work left whose size is unknown: their figures are a tiny model's

    def _figure(self, seconds: float) -> str:
        """'47m10s', or '>=8m53s (3 models of unknown size)' while sizes are unknown (size_prior)."""
        if not self.unsized:
            return fmt_s(seconds)
        return f">={fmt_s(seconds)} ({self.unsized} model{'s' if self.unsized > 1 else ''} of unknown size)"

    def basis(self) -> str:
        """Per stage with work left: its estimate per task, how many, and what it rests on."""
        return ", ".join(b.text() for b in self.stages if b.left)

    def text(self) -> str:
        """'ETA 47m10s [...]'. With a stage that has neither a sample nor a prior there is no estimate,
        and the line says so: the rest's figure is labelled a lower bound, never shown as the ETA."""
        if (settled := self._settled()) is not None:
            return settled
        if self.seconds is None:
            return (
                f"ETA unknown: no sample or prior for {self._unestimated()} (the rest alone: "
                f"{fmt_s(self.known_s)}) [{self.basis()}]"
            )
        return (
            f"ETA {self._figure(self.seconds)} [{self.basis()}; work left: timed {fmt_s(self.timed_s)}, "
            f"untimed {fmt_s(self.untimed_s)}]"
        )

    def short(self) -> str:
        """The figure alone, for a progress line: 'ETA 47m10s'; without an estimate for a stage with
        work left, 'ETA unknown (no estimate for STAGE; the rest: 4m10s)', never a lower bound as the
        ETA. What it rests on is text()'s, for the log file and the live view."""
        if (settled := self._settled()) is not None:
            return settled
        if self.seconds is None:
            return f"ETA unknown (no estimate for {self._unestimated()}; the rest: {fmt_s(self.known_s)})"
        return f"ETA {self._figure(self.seconds)}"

    def _settled(self) -> str | None:
        """The line when there is no figure to give: the estimate failed, or no work is left."""
        if self.error is not None:
            return f"ETA unavailable ({self.error})"
        if not any(b.left for b in self.stages):
            return "ETA 0s"
        return None

    def _unestimated(self) -> str:
        """The stages with work left and neither a sample nor a prior."""
        return ", ".join(b.stage for b in self.stages if b.left and b.source == NONE)


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


def _ratios(samples: Sequence[Sample], costs: CostModel) -> list[float]:
    """actual / cost-model of each sample, at its model's size (a stage the model lacks: actual / 1 s)."""
    return [s.duration_s / (costs.unit(s.stage, s.family, s.params) or 1.0) for s in samples]


def _log_median(values: Sequence[float]) -> float:
    """The median in log space: an even count meets at the geometric mean of the middle two (no
    logarithm taken: a stage skipped in no measurable time has a ratio of 0)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else math.sqrt(ordered[mid - 1] * ordered[mid])


class _Scale(NamedTuple):
    source: str
    samples: int
    factor: float | None
    with_prior: bool = False


def _scales(
    stages: Iterable[str], board: Sequence[Sample], host: Sequence[Sample], costs: CostModel
) -> dict[str, _Scale]:
    """stage -> how fast it runs here against the cost model, and what that rests on: this board's
    attempts of the stage with its prior as one more, else the prior (the host's earlier boards, else
    the cost model scaled as this board's other stages run, timed by timed and untimed by untimed
    where it can, 1 before any), else nothing."""
    modelled = [s for s in board if s.stage in costs.stages]
    out: dict[str, _Scale] = {}
    for stage in stages:
        on_host = [s for s in host if s.stage == stage]
        others = [s for s in modelled if s.stage != stage]
        alike = [s for s in others if is_timed(s.stage) == is_timed(stage)]
        others = alike or others
        if on_host:
            prior: _Scale | None = _Scale(HOST, len(on_host), _log_median(_ratios(on_host, costs)))
        elif costs.base(stage, None) is not None:  # the cost model's figure, else its stage.toml cost_s
            prior = _Scale(SHIPPED, len(others), _log_median(_ratios(others, costs)) if others else 1.0)
        else:
            prior = None
        mine = [s for s in board if s.stage == stage]
        if mine:
            known = prior.factor if prior is not None else None
            ratios = _ratios(mine, costs) + ([known] if known is not None else [])
            out[stage] = _Scale(BOARD, len(mine), _log_median(ratios), known is not None)
        else:
            out[stage] = prior or _Scale(NONE, 0, None)
    return out


class _Step(NamedTuple):
    stage: str
    seconds: float  # what is left of it (0 when it has no estimate)
    running: bool


def estimate(
    tasks: Iterable[TaskRecord],
    models: Sequence[ModelRecord],
    stages: Sequence[str],
    board: Sequence[Sample],
    host: Sequence[Sample],
    costs: CostModel,
    lanes: Lanes,
    now: datetime,
) -> Eta:
    """The time left for the unfinished tasks of `stages` (the ones this run runs, in stage order).

    `models`: the board's models, laid out in the order the scheduler serves them
    (selection.model_rank, with `costs` as shipped); `board`: the costed attempts on this
    board; `host`: those on earlier boards of this host. A model's
    tasks after a failed or blocked one, or after one of a stage this run does not run, are not
    counted: this run never reaches them, nor a paused model's. Stages the model's policy skips are
    passed over. Each task is costed at its model's size (size_prior), the size terms fitted from
    `host` and `board`."""
    selected = set(stages)
    costs = costs.fitted([*host, *board])
    scales = _scales(stages, board, host, costs)
    family = {m.pk: m.task_family for m in models}
    size = {m.pk: model_size(m) for m in models}
    scaled: dict[str, list[int]] = defaultdict(list)  # stage -> the sizes its tasks were scaled to
    unsized: Counter[str] = Counter()  # stage -> its tasks of models of unknown size
    unsized_models: set[int] = set()
    skips = {m.pk: set(m.skip_stages) for m in models}  # the board passes over them (never run)
    ranked = sorted(
        models, key=lambda m: model_rank(m.priority, costs.model_work_s(m.task_family, m.skip_stages, size[m.pk]), m.pk)
    )
    order = {m.pk: i for i, m in enumerate(ranked)}
    paused = {m.pk for m in models if m.paused}  # never claimed while paused
    by_model: dict[int, list[TaskRecord]] = defaultdict(list)
    for task in tasks:
        if task.model_pk not in paused:
            by_model[task.model_pk].append(task)
    chains: list[list[_Step]] = []
    left: Counter[str] = Counter()
    full: dict[str, list[float]] = defaultdict(list)  # full-task estimates, for the basis
    for pk in sorted(by_model, key=lambda pk: order.get(pk, len(order))):
        chain = []
        for task in sorted(by_model[pk], key=lambda t: STAGES.index(t.stage)):
            if task.status in DONE_STATUSES or (task.status == "waiting" and task.stage in skips.get(pk, ())):
                continue
            if task.status in TERMINAL_STATUSES or task.stage not in selected:
                break
            factor = scales[task.stage].factor
            base = costs.unit(task.stage, family.get(pk), size.get(pk)) or 1.0
            if _note_size(costs, task.stage, family.get(pk), size.get(pk), scaled, unsized):
                unsized_models.add(pk)
            cost = None if factor is None else base * factor
            running = task.status == "in_progress"
            rest = 0.0 if cost is None else (max(0.0, cost - _running_for(task, now)) if running else cost)
            chain.append(_Step(task.stage, rest, running))
            left[task.stage] += 1
            if cost is not None:
                full[task.stage].append(cost)
        if chain:
            chains.append(chain)
    basis = [
        StageBasis(
            st,
            scales[st].source,
            scales[st].samples,
            left[st],
            statistics.fmean(full[st]) if full[st] else None,
            scales[st].factor,
            scales[st].with_prior,
            scaled_text(costs.term(st), scaled[st], unsized[st]),
            "cost model" if st in costs.stages else "stage.toml cost_s",
        )
        for st in stages
    ]
    end = layout(chains, lanes)
    unknown = any(b.left and b.source == NONE for b in basis)
    timed = sum(step.seconds for chain in chains for step in chain if is_timed(step.stage))
    untimed = sum(step.seconds for chain in chains for step in chain if not is_timed(step.stage))
    return Eta(None if unknown else end, basis, end, timed, untimed, unsized=len(unsized_models))


def _note_size(
    costs: CostModel,
    stage: str,
    family: str | None,
    params: int | None,
    scaled: dict[str, list[int]],
    unsized: Counter[str],
) -> bool:
    """Note how a task of `stage` was sized for the basis; True when its model's size is unknown
    and would matter (the stage grows with size): its figure is then a tiny model's."""
    term = costs.term(stage)
    if term.seconds_at_1b <= 0:
        return False
    if not params:
        unsized[stage] += 1
        return True
    if term.extra(params, costs.reference_params(family)) >= MATTERS_S:
        scaled[stage].append(params)
    return False


def layout(chains: Sequence[Sequence[_Step]], lanes: Lanes) -> float:
    """When the work of `chains` (one per model, in claim order; a chain's steps one after another)
    ends, run by the scheduling rule: at every moment each free worker takes a ready step, a timed
    one while a timed slot is free, else an untimed one, the earliest chain (claim order) first; at most
    `lanes.workers` steps at once, `lanes.timed_slots` timed ones, and a stage's cap of its own.
    While no untimed step runs or is ready, one more timed step may take the lent preparation
    cores (`lanes.lendable`), and no untimed step starts until it ends."""
    workers, slots = max(1, lanes.workers), max(1, lanes.timed_slots)
    pos = [0] * len(chains)
    busy: Counter[str] = Counter()
    ready: dict[bool, list[int]] = {True: [], False: []}  # timed? -> heap of chain indexes (claim order)
    ends: list[tuple[float, int]] = []  # heap of (end, chain)
    now = 0.0

    def start(i: int) -> None:
        step = chains[i][pos[i]]
        busy[step.stage] += 1
        busy["<timed>" if is_timed(step.stage) else "<untimed>"] += 1
        heapq.heappush(ends, (now + step.seconds, i))

    def queue(i: int) -> None:
        step = chains[i][pos[i]]
        heapq.heappush(ready[is_timed(step.stage)], i)

    def take(timed: bool) -> int | None:
        """The first ready chain of this kind whose stage is under its cap."""
        skipped, found = [], None
        heap = ready[timed]
        while heap:
            item = heapq.heappop(heap)
            stage = chains[item][pos[item]].stage
            if busy[stage] < lanes.limits.get(stage, workers):
                found = item
                break
            skipped.append(item)
        for item in skipped:
            heapq.heappush(heap, item)
        return found

    for i, chain in enumerate(chains):
        (start if chain[0].running else queue)(i)
    while True:
        while busy["<timed>"] + busy["<untimed>"] < workers:
            idle_prep = not busy["<untimed>"] and not ready[False]
            found = take(True) if busy["<timed>"] < slots + (lanes.lendable if idle_prep else 0) else None
            found = take(False) if found is None and busy["<timed>"] <= slots else found
            if found is None:
                break
            start(found)
        if not ends:
            return now
        now, i = heapq.heappop(ends)
        done = chains[i][pos[i]]
        busy[done.stage] -= 1
        busy["<timed>" if is_timed(done.stage) else "<untimed>"] -= 1
        pos[i] += 1
        if pos[i] < len(chains[i]):
            queue(i)
