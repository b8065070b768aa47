"""Honest timing and one separate profiled run, for accuracy_run.py and the optimization stage.

Timing rules (docs/benchmark.md, "Timing helpers"): the same warmup for every variant, the device synchronised
before the clock starts and before it stops, the profiler never on while timing, statistics as
median / p90 / min. Device specifics (synchronize, peak memory) come from the caller as small
callables so this module stays free of NPU/CUDA imports and testable on CPU.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from . import sizing
from .fileops import atomic_path
from .pairstats import percentile
from .phases import phase
from .progress import Progress

Sync = Callable[[], None]


@dataclass
class Timing:
    """Latency statistics in milliseconds over `iterations` timed calls after `warmup` calls."""

    warmup: int
    iterations: int
    median_ms: float
    p90_ms: float
    min_ms: float
    mean_ms: float
    stdev_ms: float
    samples_ms: list[float]
    profiler_during_timing: bool = False
    sizing: dict[str, Any] | None = None  # the counts' record when a budget sized them (ab_runtime/sizing.py)

    def as_dict(self) -> dict[str, Any]:
        record = asdict(self)
        if self.sizing is None:  # an unsized timing's block is what it always was
            del record["sizing"]
        return record


def summarize(samples_ms: list[float], warmup: int) -> Timing:
    return Timing(
        warmup=warmup,
        iterations=len(samples_ms),
        median_ms=statistics.median(samples_ms),
        p90_ms=percentile(samples_ms, 90),
        min_ms=min(samples_ms),
        mean_ms=statistics.fmean(samples_ms),
        stdev_ms=statistics.stdev(samples_ms) if len(samples_ms) > 1 else 0.0,
        samples_ms=samples_ms,
    )


def profiler_active() -> bool:
    """True when a torch profiler is recording in this thread (timing must then refuse)."""
    return bool(torch.autograd._profiler_enabled())


def time_forward(fn: Callable[[], Any], sync: Sync, warmup: int, iterations: int, seed: int | None = None) -> Timing:
    """Warm up, re-seed the RNG, then time `iterations` calls, each bracketed by device sync.

    Re-seeding after warmup means a warmup can never change what the timed calls compute.
    """
    return time_calibrated(fn, None, sync, warmup, iterations, seed)[0]


def time_calibrated(
    fn: Callable[[], Any],
    probe: Callable[[], float] | None,
    sync: Sync,
    warmup: int,
    iterations: int,
    seed: int | None = None,
    budget_s: float | None = None,
) -> tuple[Timing, list[float]]:
    """`time_forward`, with one call of the calibration `probe` (ab_runtime/calibration.py, it
    returns its own milliseconds) after every timed call: (timing, probe samples; empty without).
    With `budget_s` (and a warm-up call to clock) the timed calls are sized to it (ab_runtime/sizing.py)."""
    if iterations < 1:
        raise ValueError("iterations must be >= 1")
    if warmup < 0:
        raise ValueError("warmup must be >= 0")
    if profiler_active():
        raise RuntimeError("a profiler is active: timing with the profiler on is not allowed")
    probe_ms: list[float] = []
    sized = None
    what = f"timed calls ({warmup} warmup, {'up to ' if budget_s is not None else ''}{iterations} timed)"
    with torch.inference_mode(), Progress(what, total=warmup + iterations, unit="call") as progress:
        with phase("warmup"):
            for done in range(warmup):
                if done == 0 and budget_s is not None:
                    sized = sizing.size(clocked(fn, sync)[1] / 1000, warmup, iterations, budget_s)
                    iterations = sized.iterations
                    progress.total = warmup + iterations
                else:
                    fn()
                progress.advance()
            sync()
        if seed is not None:
            torch.manual_seed(seed)
        samples: list[float] = []
        with phase("measurement"):
            for _ in range(iterations):
                sync()
                start = time.perf_counter_ns()
                fn()
                sync()
                samples.append((time.perf_counter_ns() - start) / 1e6)
                if probe is not None:
                    probe_ms.append(probe())
                progress.advance()  # outside the clock: a line is written at most every few seconds
    timing = summarize(samples, warmup)
    timing.sizing = sized.record() if sized is not None else None
    return timing, probe_ms


def clocked(fn: Callable[[], Any], sync: Sync) -> tuple[Any, float]:
    """One call of `fn` and its milliseconds, the device synchronised before the clock starts and
    before it stops: for runs that time each call once (a generation's phases, a business item)."""
    sync()
    start = time.perf_counter_ns()
    value = fn()
    sync()
    return value, (time.perf_counter_ns() - start) / 1e6


def _profiler_activities(device_kind: str) -> list[Any]:
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device_kind == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return activities


def profile_forward(
    fn: Callable[[], Any], sync: Sync, device_kind: str, trace_path: Path, steps: int = 2
) -> dict[str, Any]:
    """One separate profiled run (after timing) exported as a Chrome trace at `trace_path`.

    On NPU the torch_npu profiler is used (documented API: torch_npu.profiler.profile with
    ProfilerActivity.CPU/NPU and export_chrome_trace); elsewhere torch.profiler.
    """
    trace_path = Path(trace_path)
    if device_kind == "npu":
        import torch_npu  # only present in the ascend profile

        prof_mod = torch_npu.profiler
        activities = [prof_mod.ProfilerActivity.CPU, prof_mod.ProfilerActivity.NPU]
        profiler = prof_mod.profile(activities=activities)
    else:
        profiler = torch.profiler.profile(activities=_profiler_activities(device_kind))
    with torch.inference_mode():
        sync()
        with profiler:
            for _ in range(steps):
                fn()
            sync()
    with atomic_path(trace_path) as tmp:
        profiler.export_chrome_trace(str(tmp))
        events = _count_trace_events(tmp)
    return {
        "trace": trace_path.name,
        "profiled_steps": steps,
        "events": events,
        "profiler": "torch_npu.profiler" if device_kind == "npu" else "torch.profiler",
    }


def _count_trace_events(path: Path) -> int:
    data = json.loads(Path(path).read_text())
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    return len(events)


def throughput(samples_per_call: int, median_ms: float) -> float | None:
    """Samples per second at the median latency."""
    return samples_per_call / (median_ms / 1000.0) if median_ms > 0 else None
