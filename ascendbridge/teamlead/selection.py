"""Which ready tasks the team lead starts now: by readiness and resources, not by stage order.

A pure function of what is ready and what is free, so the policy is tested without a board:
- Timed work first: a free timed slot (a device, or a core group on a CPU-only host) never idles
  while a timed task is ready; untimed work (discovery, adaptation, healing) takes the workers
  left, and runs on the cores no timed slot owns (ascendbridge.workers.placement).
- Finish models, not stages, the longest first: among tasks of the same kind, a higher model
  priority first, then the model whose stages cost the most in all (`work_s`, the shipped cost
  model's seconds for its task family over the stages it runs, with their size terms at its size;
  an undiscovered model first, since its few seconds of discovery tell its family and size), then
  registration order. The rank is the model's,
  whichever stage is next, so a model's later stages are not starved behind every model's earlier
  ones (its business benchmark goes before a shorter model's optimization), and neither is a
  chain's head: ranking the later stage first once left a model's training, its first timed stage,
  waiting until every other model's timed stages had run. Longest first keeps both lanes busy to
  the end: registered last, a served model's five minutes once ran alone after every other model
  had finished (the main job's last five minutes). A waiting gate re-check (its stage already ran)
  goes before a fresh task of its priority.
- One task per model at a time; per-stage caps (--stage-workers) hold.
- A worker stays free for each timed slot a waiting gate re-check will want (`reserved`): its
  backoff ends on a clock, not when another task ends, so untimed work must not hold every worker.
- Idle preparation cores are lent (CPU-only host, ascendbridge.workers.placement): a timed task
  may take them only when no untimed task is ready to start and none runs (`lendable`); while
  they are lent, untimed tasks wait (`preparing` false).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ascendbridge.workers.placement import is_timed


@dataclass(frozen=True)
class Candidate:
    """A task that could start now: a pending task, or a gate re-check whose backoff is over."""

    task_id: int
    model_pk: int
    stage: str
    priority: int = 0
    devices: int = 1  # timed slots it needs at once (a sharded model's plan)
    recheck: bool = False
    work_s: float = 0.0  # what all of its model's stages cost (model_work_s): the longer model first


@dataclass(frozen=True)
class Resources:
    """What is free now."""

    workers: int  # free worker slots
    timed: int  # free timed slots
    timed_capacity: int  # timed slots on this host
    running: Mapping[str, int] = field(default_factory=dict)  # running jobs per stage
    limits: Mapping[str, int] = field(default_factory=dict)  # per-stage caps; absent: no cap
    busy_models: frozenset[int] = frozenset()  # models with a job running (or a re-check waiting)
    reserved: int = 0  # workers kept for timed work that becomes ready on a clock (waiting re-checks)
    lendable: int = 0  # idle preparation cores a timed task may borrow as one more slot (0 or 1)
    preparing: bool = True  # untimed tasks may start (the preparation cores are not lent)


def model_rank(priority: int, work_s: float, model_pk: int) -> tuple[int, float, int]:
    """The order models are served in, first first: priority, the longer work, registration (what
    urgency ranks by after a task's kind); the ETA lays out the remaining work in this order."""
    return (-priority, -work_s, model_pk)


def urgency(c: Candidate) -> tuple[int, int, int, tuple[int, float, int]]:
    """Sort key, most urgent first: timed, priority, re-check, then the model's rank (one task per
    model runs at a time, so the model decides; its stage never needs to)."""
    return (
        0 if is_timed(c.stage) else 1,
        -c.priority,
        0 if c.recheck else 1,
        model_rank(c.priority, c.work_s, c.model_pk),
    )


def select(candidates: Iterable[Candidate], free: Resources) -> list[Candidate]:
    """The candidates to start now, in start order. A timed candidate that needs more slots than are
    free waits (one needing more than the host has is returned, for the caller to block it)."""
    workers, timed, reserved = free.workers, free.timed, min(free.reserved, free.timed)
    running: Counter[str] = Counter(free.running)
    models = set(free.busy_models)
    candidates = list(candidates)
    untimed_ready = any(not is_timed(c.stage) and c.model_pk not in models for c in candidates)
    lend = 0 if untimed_ready or not free.preparing else free.lendable
    picked: list[Candidate] = []
    for c in sorted(candidates, key=urgency):
        if workers == 0:
            break
        limit = free.limits.get(c.stage)
        if c.model_pk in models or (limit is not None and running[c.stage] >= limit):
            continue
        if is_timed(c.stage):
            if c.devices <= free.timed_capacity:
                if c.devices > timed:
                    if not (c.devices == 1 and lend):
                        continue
                    lend = 0
                else:
                    timed -= c.devices
                    reserved = min(reserved, timed)
        elif workers <= reserved or not free.preparing:
            continue
        picked.append(c)
        workers -= 1
        running[c.stage] += 1
        models.add(c.model_pk)
    return picked
