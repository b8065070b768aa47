"""An attempt's progress heartbeat: where it lives and how people are shown it.

The model code of a running attempt writes its last progress line and that line's time
(ab_runtime/progress.py) to `attempt-N.progress.json`, beside the attempt log
`logs/<adaptation>/<stage>/attempt-N.log`: the executor names the file in the attempt's environment
and removes the one an earlier try of the same attempt number left. The team lead's progress output
and the dashboard's model page read it for running attempts only.
"""

from __future__ import annotations

from pathlib import Path

from ab_runtime.progress import Heartbeat, read_heartbeat

SUFFIX = ".progress.json"


def heartbeat_path(log_path: Path) -> Path:
    """`attempt-3.log` -> `attempt-3.progress.json` (the attempt's other files: attempt-3.run.json, ...)."""
    return log_path.with_name(log_path.stem + SUFFIX)


def last_progress(log_path: Path) -> Heartbeat | None:
    """The running attempt's last progress line and its time; None before its first."""
    return read_heartbeat(heartbeat_path(log_path))


def progress_text(log_path: Path, now: float | None = None) -> str:
    """`accuracy (reference): sample 40/64, elapsed 3m10s, 4.8s/sample (12s ago)`, or what is missing."""
    beat = last_progress(log_path)
    return beat.describe(now) if beat is not None else "no progress line yet"
