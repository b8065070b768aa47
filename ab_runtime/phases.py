"""Where a process's time went, by named phase: the parts of a stage attempt's cost profile
(docs/evidence.md, "Where an attempt's time went").

One recorder per process. `phase(name)` charges the wall time of its block to `name`, less the
time of any phase nested in it: time goes to the innermost phase, so phases never overlap and
their sum never exceeds the process's wall time. `add(name, seconds)` charges time measured
elsewhere (a child process's own phases, from its RESULT line) the same way. Every runtime
script's RESULT line carries its `phases` (ab_runtime/result.py), and the framework adds a model
run's phases to its own where it reads that line (ascendbridge/package/uv_env.py), so the phases
of the model process reach the stage's worker, which hands them to the team lead. Standard
library only: the framework imports this file.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Literal, get_args

# The phases a cost profile names; the time no phase claims is the attempt's "other".
PhaseName = Literal[
    "staging",  # the attempt's staging copy of the adaptation (the team lead's executor)
    "process_start",  # a process's start until its work begins: interpreter, imports (torch's too)
    "env_sync",  # uv lock / uv sync of the package's environment, the serve environment's install
    "model_load",  # building or loading the model (reference and target)
    "export",  # serving: the weights and the CPU reference exported for the engine
    "server_start",  # serving: the engine's start until it answers (its cold start)
    "compile",  # building a pass's variant and its first call (where torch.compile compiles)
    "accuracy",  # every sample forwarded for the comparison with the reference; a generation's greedy tokens
    "warmup",  # the untimed calls before a measurement
    "measurement",  # timed calls, paired blocks, acceptance requests and `vllm bench serve`
    "contract",  # training: the baseline contract's steps (reference, target, checkpoint round trip)
    "pass_search",  # training: the training passes judged by the contract and timed in pairs
    "training",  # training: the job's own steps and its held-out evaluation
    "profile",  # training: the profiled window of steady-state steps
    "gate",  # the stage's gate, a process of its own
]
PHASE_NAMES: tuple[str, ...] = get_args(PhaseName)

_lock = threading.Lock()
_totals: dict[str, float] = {}
_local = threading.local()  # per thread: the nested phases' child seconds, innermost last
_started = False


def _stack() -> list[float]:
    stack: list[float] | None = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def _charge(name: str, seconds: float) -> None:
    """`seconds` to `name`, and to the enclosing phase as its child's time (not its own)."""
    with _lock:
        _totals[name] = _totals.get(name, 0.0) + seconds
    stack = _stack()
    if stack:
        stack[-1] += seconds


@contextmanager
def phase(name: PhaseName) -> Iterator[None]:
    """Charge the block's wall time, less its nested phases', to `name`."""
    stack = _stack()
    stack.append(0.0)
    start = time.perf_counter()
    try:
        yield
    finally:
        elapsed = time.perf_counter() - start
        children = stack.pop()
        with _lock:
            _totals[name] = _totals.get(name, 0.0) + max(0.0, elapsed - children)
        if stack:
            stack[-1] += elapsed


def add(name: PhaseName, seconds: float) -> None:
    """Charge `seconds` measured elsewhere (a server's cold start) to `name`."""
    _charge(name, max(0.0, seconds))


def add_reported(reported: object) -> None:
    """Add a child process's phases (its RESULT line's `phases`); a malformed or unknown entry is
    ignored: a profile is a measurement for people, never a verdict."""
    if not isinstance(reported, Mapping):
        return
    for name, seconds in reported.items():
        if name in PHASE_NAMES and isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
            if math.isfinite(seconds) and seconds > 0:
                _charge(name, float(seconds))


def process_started() -> None:
    """Charge this process's start (its creation until now) to `process_start`, once per process.
    Linux only (the kernel's start time of the process); elsewhere nothing is charged."""
    global _started
    if _started:
        return
    _started = True
    seconds = seconds_since_process_start()
    if seconds is not None:
        add("process_start", seconds)


def seconds_since_process_start() -> float | None:
    """Seconds since the kernel created this process (/proc, 10 ms resolution), None off Linux."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        start = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 (starttime), counted after the name
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, uptime - start)


def snapshot() -> dict[str, float]:
    """The phases recorded so far, in seconds (ms resolution), zeros left out."""
    with _lock:
        return {name: round(s, 3) for name, s in sorted(_totals.items()) if s >= 0.0005}


def take() -> dict[str, float]:
    """`snapshot()`, then start again from nothing (a worker hands its phases over once)."""
    out = snapshot()
    with _lock:
        _totals.clear()
    return out
