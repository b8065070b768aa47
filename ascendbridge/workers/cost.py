"""An attempt's cost profile: where its time went (phases -> seconds, the rest "other") and the
peak resident memory of its processes, as the team lead records them on the attempt's row.

The run's worker reports its phases (ab_runtime/phases.py, a model run's included) and its peak
memory in its outcome's `cost`; the gate counts as one phase, `gate`, its worker's whole time; the
executor adds its own (`staging`). Whatever of the attempt's duration no phase claims is `other`,
so the phases always sum to the attempt's duration.
"""

from __future__ import annotations

import resource
import sys
from typing import TYPE_CHECKING

from ab_runtime.phases import take
from ascendbridge.stage_api import ProcessCost

if TYPE_CHECKING:
    from ascendbridge.workers.executor import JobResult

OTHER = "other"


def peak_rss_bytes() -> int:
    """The peak resident memory of the largest process among this one and the descendants it
    waited for (getrusage's ru_maxrss of SELF and CHILDREN: a maximum over processes, not their
    sum). Measured in a worker, that is the attempt's largest process: the worker, uv, the model
    run, a server."""
    unit = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) * unit


def process_cost() -> ProcessCost:
    """This worker's phases (handed over once) and its peak memory so far."""
    return ProcessCost(take(), peak_rss_bytes())


def attempt_profile(result: JobResult) -> tuple[dict[str, float], int | None]:
    """The attempt's phases in seconds, with `other` for the time none claims (their sum is the
    attempt's duration), and its peak memory: the larger of its run's and its gate's."""
    spent: dict[str, float] = dict(result.phases)
    costs: list[ProcessCost] = []
    if result.run is not None and result.run.data is not None and result.run.data.cost is not None:
        costs.append(result.run.data.cost)
        for name, seconds in result.run.data.cost.phases.items():
            spent[name] = spent.get(name, 0.0) + seconds
    if result.gate is not None:
        spent["gate"] = spent.get("gate", 0.0) + result.gate.duration_s
        if result.gate.data is not None and result.gate.data.cost is not None:
            costs.append(result.gate.data.cost)
    spent[OTHER] = max(0.0, result.duration_s - sum(spent.values()))
    peaks = [c.peak_rss_bytes for c in costs if c.peak_rss_bytes is not None]
    return {name: round(s, 3) for name, s in spent.items()}, max(peaks) if peaks else None
