"""Where the time goes in one Chrome trace (torch.profiler, or torch_npu's trace_view.json).

- operators ranked by SELF time (an op's duration minus its direct children on the same lane);
  each share is of the profiled WINDOW, so idle time (no op running: Python overhead, waits)
  stays in the denominator and shows as its own line instead of inflating every op;
- the smallest set of top operators covering >= 90% of busy time: what is worth optimising;
- host vs device split (kernels / NPU tasks vs CPU-side ops);
- copies (host<->device transfers, dtype/layout copies);
- on NPU traces, AI_CPU tasks: operators that fell back from the AI cores to the NPU's CPU.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ascendbridge.gatekit.trace import complete_events

COVERAGE = 0.90
DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
HOST_CATEGORIES = {"cpu_op", "cuda_runtime", "cuda_driver", "operator", None}
WRAPPER_CATEGORIES = {"user_annotation", "python_function", "Trace", "gpu_user_annotation", "ac2g"}
_DEVICE_PROCESS = re.compile(r"GPU|NPU|Ascend Hardware|stream", re.IGNORECASE)
_COPY = re.compile(r"copy|memcpy|memset|HtoD|DtoH|H2D|D2H|HostToDevice|DeviceToHost|TransData|aten::to$", re.IGNORECASE)


@dataclass
class Lane:
    side: str  # "host" | "device"
    events: list[dict[str, Any]]


def _process_names(events: Iterable[dict[str, Any]]) -> dict[Any, str]:
    names: dict[Any, str] = defaultdict(str)
    for e in events:
        if e.get("ph") == "M" and e.get("name") in ("process_name", "process_labels"):
            args = e.get("args") or {}
            names[e.get("pid")] += " " + str(args.get("name") or args.get("labels") or "")
    return names


def trace_kind(events: list[dict[str, Any]]) -> str:
    """npu, cuda or cpu, from the processes and categories present."""
    procs = " ".join(_process_names(events).values())
    if re.search(r"Ascend|NPU", procs) or any("Task Type" in (e.get("args") or {}) for e in events):
        return "npu"
    if any(e.get("cat") in DEVICE_CATEGORIES for e in events):
        return "cuda"
    return "cpu"


def _side(event: dict[str, Any], procs: dict[Any, str]) -> str:
    if event.get("cat") in DEVICE_CATEGORIES or "Task Type" in (event.get("args") or {}):
        return "device"
    return "device" if _DEVICE_PROCESS.search(procs.get(event.get("pid"), "")) else "host"


def split_lanes(events: list[dict[str, Any]]) -> dict[tuple[Any, Any], Lane]:
    """Complete, non-wrapper events grouped by (pid, tid), each lane host or device."""
    procs = _process_names(events)
    lanes: dict[tuple[Any, Any], Lane] = {}
    for e in complete_events(events):
        if e.get("cat") in WRAPPER_CATEGORIES:
            continue
        key = (e.get("pid"), e.get("tid"))
        side = _side(e, procs)
        lanes.setdefault(key, Lane(side, [])).events.append(e)
    return lanes


def self_times(events: list[dict[str, Any]]) -> tuple[list[tuple[dict[str, Any], float]], float]:
    """Per-event self time on one lane, and the lane's busy time (union of top-level spans)."""
    ordered = sorted(events, key=lambda e: (e["ts"], -e["dur"]))
    stack: list[list[Any]] = []  # [event, end, child_time]
    out: list[tuple[dict[str, Any], float]] = []
    busy = 0.0

    def pop() -> None:
        event, _, child = stack.pop()
        out.append((event, max(event["dur"] - child, 0.0)))

    for e in ordered:
        end = e["ts"] + e["dur"]
        while stack and e["ts"] >= stack[-1][1]:
            pop()
        if stack:
            stack[-1][2] += min(e["dur"], stack[-1][1] - e["ts"])
        else:
            busy += e["dur"]
        stack.append([e, end, 0.0])
    while stack:
        pop()
    return out, busy


def _rank(pairs: list[tuple[dict[str, Any], float]], busy: float, window: float, limit: int) -> dict[str, Any]:
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for event, self_us in pairs:
        totals[event["name"]][0] += self_us
        totals[event["name"]][1] += 1
    ranked = sorted(totals.items(), key=lambda kv: kv[1][0], reverse=True)
    total_self = sum(v[0] for _, v in ranked) or 1.0
    rows: list[dict[str, Any]] = []
    cumulative, covering = 0.0, 0
    for name, (self_us, count) in ranked:
        cumulative += self_us
        if covering == 0 and cumulative >= COVERAGE * total_self:
            covering = len(rows) + 1
        rows.append(
            {
                "name": name,
                "self_us": round(self_us, 3),
                "calls": int(count),
                "pct_of_window": round(100.0 * self_us / window, 3) if window else 0.0,
                "pct_of_busy": round(100.0 * self_us / total_self, 3),
            }
        )
    return {
        "busy_us": round(busy, 3),
        "idle_us": round(max(window - busy, 0.0), 3),
        "idle_pct_of_window": round(100.0 * max(window - busy, 0.0) / window, 3) if window else 0.0,
        "operators": len(rows),
        "covering_90pct": [r["name"] for r in rows[: covering or len(rows)]],
        "top": rows[:limit],
    }


def analyse(events: list[dict[str, Any]], limit: int = 20) -> dict[str, Any]:
    """The hotspot report for one trace's events."""
    complete = complete_events(events)
    if not complete:
        raise ValueError("trace has no complete events")
    window = max(e["ts"] + e["dur"] for e in complete) - min(e["ts"] for e in complete)
    lanes = split_lanes(events)
    report: dict[str, Any] = {"kind": trace_kind(events), "window_us": round(window, 3)}
    copies: dict[str, dict[str, float]] = {}
    for side in ("host", "device"):
        pairs: list[tuple[dict[str, Any], float]] = []
        busy = 0.0
        for lane in (ln for ln in lanes.values() if ln.side == side):
            lane_pairs, lane_busy = self_times(lane.events)
            pairs += lane_pairs
            busy += lane_busy
        report[side] = _rank(pairs, busy, window, limit) if pairs else None
        copy_pairs = [(e, s) for e, s in pairs if _COPY.search(e["name"])]
        copies[side] = {"calls": len(copy_pairs), "self_us": round(sum(s for _, s in copy_pairs), 3)}
    report["copies"] = copies
    report["host_vs_device"] = {side: report[side]["busy_us"] if report[side] else 0.0 for side in ("host", "device")}
    fallbacks: dict[str, int] = defaultdict(int)
    if report["kind"] == "npu":
        for e in complete:
            if str((e.get("args") or {}).get("Task Type", "")).upper() == "AI_CPU":
                fallbacks[e["name"]] += 1
    report["cpu_fallbacks"] = [{"name": n, "calls": c} for n, c in sorted(fallbacks.items(), key=lambda kv: -kv[1])]
    return report


def format_report(report: dict[str, Any]) -> str:
    """Human-readable tables for the CLI."""
    lines = [f"trace kind {report['kind']}, window {report['window_us'] / 1000:.3f} ms"]
    for side in ("host", "device"):
        part = report[side]
        if not part:
            lines.append(f"{side}: no events")
            continue
        lines.append(
            f"{side}: busy {part['busy_us'] / 1000:.3f} ms, idle {part['idle_pct_of_window']:.1f}% of window, "
            f"{len(part['covering_90pct'])} of {part['operators']} operators cover 90% of busy time"
        )
        lines.append(f"  {'operator':48s} {'self ms':>9s} {'calls':>6s} {'% window':>9s} {'% busy':>7s}")
        for row in part["top"]:
            lines.append(
                f"  {row['name'][:48]:48s} {row['self_us'] / 1000:9.3f} {row['calls']:6d} "
                f"{row['pct_of_window']:9.2f} {row['pct_of_busy']:7.2f}"
            )
        lines.append(
            f"  {'(idle: no operator running)':48s} {part['idle_us'] / 1000:9.3f} {'':6s} "
            f"{part['idle_pct_of_window']:9.2f}"
        )
    c = report["copies"]
    lines.append(
        f"copies: host {c['host']['calls']} calls / {c['host']['self_us'] / 1000:.3f} ms, "
        f"device {c['device']['calls']} calls / {c['device']['self_us'] / 1000:.3f} ms"
    )
    if report["kind"] == "npu":
        fb = report["cpu_fallbacks"]
        lines.append("AI_CPU fallbacks: " + (", ".join(f"{f['name']} x{f['calls']}" for f in fb) if fb else "none"))
    return "\n".join(lines)
