"""Chrome trace files (torch.profiler / torch_npu export): loading and validation, no torch.

Perfetto and chrome://tracing accept either `{"traceEvents": [...]}` or a bare event list; a
usable trace has at least one complete ("X") event with a name, a timestamp and a duration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ab_runtime.metrics_file import load_json


class TraceError(ValueError):
    """A file that is not a usable Chrome trace."""


def load_trace(path: Path) -> list[dict[str, Any]]:
    """The trace's events; raises TraceError with a one-line reason."""
    data = load_json(path, TraceError, "trace file not found")
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceError(f"{Path(path).name}: no traceEvents list")
    return [e for e in events if isinstance(e, dict)]


def complete_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Well-formed duration events ("X" with numeric ts and dur >= 0)."""
    out = []
    for e in events:
        if e.get("ph") != "X" or not isinstance(e.get("name"), str):
            continue
        ts, dur = e.get("ts"), e.get("dur")
        if isinstance(ts, (int, float)) and isinstance(dur, (int, float)) and dur >= 0:
            out.append(e)
    return out


def validate_trace(path: Path) -> dict[str, Any]:
    """Summary of a valid trace, or TraceError: it must hold complete events with real spans."""
    events = load_trace(path)
    complete = complete_events(events)
    if not complete:
        raise TraceError(f"{Path(path).name}: no complete ('X') events with ts and dur")
    start = min(e["ts"] for e in complete)
    end = max(e["ts"] + e["dur"] for e in complete)
    if end <= start:
        raise TraceError(f"{Path(path).name}: events span no time")
    return {"events": len(events), "complete_events": len(complete), "span_us": end - start}
