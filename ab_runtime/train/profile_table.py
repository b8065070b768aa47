"""Where a training step's time goes: a profiler trace reduced to the table the stage keeps.

The input is the Chrome trace torch.profiler exports (`traceEvents`: complete events `ph: "X"`
with `ts` and `dur` in microseconds, `cat`, `name`, `pid`, `tid`). Standard library only, so the
gate and the dashboard read it without torch.

- steps: the `ProfilerStep#N` annotations; their summed duration is the window.
- optimizer: time inside `Optimizer.step` / `Optimizer.zero_grad` annotations.
- data: time inside data annotations (`enumerate(DataLoader)...`, the harness's `ab.data`).
- communication: collective operators (all_reduce, all_gather, reduce_scatter, broadcast; gloo,
  NCCL, HCCL) by their self time.
- compute: every other operator's self time (its duration less its children's), by operator name,
  ranked; `operators` lists those that make up 90 % of it.
- device kernels: on CUDA / NPU traces (`cat` kernel), kernel time by name, used as compute time.
- host overhead and idle: the window less the operators' time on the stepping thread (Python,
  the framework's dispatch, and waiting).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

COMMUNICATION = re.compile(r"all_?reduce|all_?gather|reduce_?scatter|broadcast|nccl|hccl|gloo|c10d::", re.I)
OPTIMIZER = ("Optimizer.step", "Optimizer.zero_grad")
DATA = ("enumerate(DataLoader)", "ab.data")
DEVICE_KERNEL_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
COVER = 0.90  # the ranked operators listed make up this share of the compute time


def _complete(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("ph") == "X" and isinstance(e.get("dur"), (int, float))]


def _within(event: dict[str, Any], spans: list[tuple[float, float]]) -> bool:
    start = float(event["ts"])
    return any(a <= start < b for a, b in spans)


def _spans(events: list[dict[str, Any]], prefixes: tuple[str, ...]) -> list[tuple[float, float]]:
    return [
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in events
        if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(prefixes)
    ]


def self_times(ops: list[dict[str, Any]]) -> list[tuple[dict[str, Any], float]]:
    """Each operator with its self time: its duration less that of the operators nested in it on
    the same thread (a stack per thread, events in start order)."""
    result: list[tuple[dict[str, Any], float]] = []
    by_thread: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for op in ops:
        by_thread[(op.get("pid"), op.get("tid"))].append(op)
    for thread_ops in by_thread.values():
        thread_ops.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
        stack: list[list[Any]] = []  # [event, end, child time]
        for op in thread_ops:
            start, end = float(op["ts"]), float(op["ts"]) + float(op["dur"])
            while stack and start >= stack[-1][1]:
                done = stack.pop()
                result.append((done[0], float(done[0]["dur"]) - done[2]))
            if stack:
                stack[-1][2] += float(op["dur"])
            stack.append([op, end, 0.0])
        result.extend((event, float(event["dur"]) - child) for event, _, child in reversed(stack))
    return result


def reduce_trace(trace: dict[str, Any]) -> dict[str, Any]:
    """The table of one profiled window (all times in milliseconds, shares of the window)."""
    events = _complete(trace.get("traceEvents", []))
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    window_us = sum(float(e["dur"]) for e in steps)
    optimizer, data = _spans(events, OPTIMIZER), _spans(events, DATA)
    kernels = [e for e in events if e.get("cat") in DEVICE_KERNEL_CATS]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    buckets = {"optimizer": 0.0, "data": 0.0, "communication": 0.0}
    compute: dict[str, float] = defaultdict(float)
    for op, own in self_times(ops):
        name = str(op.get("name", ""))
        if COMMUNICATION.search(name):
            buckets["communication"] += own
        elif _within(op, optimizer):
            buckets["optimizer"] += own
        elif _within(op, data):
            buckets["data"] += own
        elif not kernels:
            compute[name] += own
    for kernel in kernels:  # on an accelerator the compute is the device's kernels
        name = str(kernel.get("name", ""))
        target = "communication" if COMMUNICATION.search(name) else None
        if target:
            buckets[target] += float(kernel["dur"])
        else:
            compute[name] += float(kernel["dur"])
    compute_us = sum(compute.values())
    accounted = compute_us + sum(buckets.values())
    return {
        "steps": len(steps),
        "window_ms": window_us / 1e3,
        "compute_ms": compute_us / 1e3,
        **{f"{k}_ms": v / 1e3 for k, v in buckets.items()},
        "host_overhead_and_idle_ms": max(0.0, window_us - accounted) / 1e3,
        "shares": {
            k: (v / window_us if window_us else 0.0)
            for k, v in {
                "compute": compute_us,
                **buckets,
                "host_overhead_and_idle": max(0.0, window_us - accounted),
            }.items()
        },
        "operators": ranked_operators(compute),
        "device_kernels": bool(kernels),
    }


def ranked_operators(compute: dict[str, float]) -> list[dict[str, Any]]:
    """The operators, most time first, until they make up COVER of the compute time."""
    total = sum(compute.values())
    listed: list[dict[str, Any]] = []
    covered = 0.0
    for name, us in sorted(compute.items(), key=lambda kv: (-kv[1], kv[0])):
        if total and covered >= COVER * total:
            break
        listed.append({"name": name, "ms": us / 1e3, "share": us / total if total else 0.0})
        covered += us
    return listed
