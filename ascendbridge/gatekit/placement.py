"""A gate run by hand re-times where the stage's run timed: the cores and torch threads its evidence
recorded (`environment.cpu_affinity`, `environment.torch_threads`), applied to the gate's own
process and so to the re-execution it starts. The team lead's gates already run on the job's cores
(ASCENDBRIDGE_CPU_AFFINITY) and keep them. Used by the benchmark gate and the optimization perf gate.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from ascendbridge.workers.placement import CPU_AFFINITY_ENV


def recorded_placement(metrics: Iterable[dict[str, Any]]) -> tuple[list[int], int | None]:
    """(cores, torch threads) the first evidence file that recorded them says; empty / None where an
    older run did not record them."""
    for body in metrics:
        env = body.get("environment") or {}
        cpus, threads = env.get("cpu_affinity"), env.get("torch_threads")
        if isinstance(cpus, list) and cpus and all(isinstance(c, int) for c in cpus):
            return cpus, threads if isinstance(threads, int) and threads > 0 else None
    return [], None


def apply_recorded_placement(metrics: Iterable[dict[str, Any]]) -> str:
    """Pin this process to the recorded cores (or, where they are not all here, to as many of its
    own) and set OMP_NUM_THREADS to the recorded threads; returns what it did, for the report."""
    cpus, threads = recorded_placement(metrics)
    allowed = sorted(os.sched_getaffinity(0))
    if not cpus:
        return f"no placement recorded in the evidence (an older run): re-timed on cores {_cores(allowed)} as placed"
    if threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(threads)
    said = f"torch threads {threads} as recorded" if threads is not None else "torch threads not recorded"
    if os.environ.get(CPU_AFFINITY_ENV, "").strip():
        return f"cores {_cores(allowed)} as the team lead placed this gate (the run had {_cores(cpus)}); {said}"
    if set(cpus) <= set(allowed):
        os.sched_setaffinity(0, cpus)
        return f"pinned to cores {_cores(cpus)} as the run recorded; {said}"
    chosen = allowed[-len(cpus) :]
    os.sched_setaffinity(0, chosen)
    return (
        f"the run's cores {_cores(cpus)} are not all available here: pinned to {len(chosen)} of this "
        f"host's cores ({_cores(chosen)}); {said}"
    )


def _cores(cpus: list[int]) -> str:
    return ",".join(map(str, cpus))
