"""Whether a contained command died for memory, judged from the kernel's own evidence.

The kernel's OOM killer ends a process with SIGKILL (exit -9, or 137 through a wrapper such as
`uv run`), and Python's allocator raises MemoryError; a retry with the same plan meets the same
end, so such an attempt is diagnosed `out_of_memory`, a refusal with its remedy, never retried
blind. SIGKILL alone is no proof (a person's `kill -9`, the team lead's own stop): a kill counts
as one for memory only without a timeout and when the OOM killer's counter (this cgroup's, else
the host's) rose while the command ran; on a host that exposes no counter it is reported as
suspected. The team lead's stop and the timeout are ruled out by their callers, which know them.

Every contained command (ascendbridge/workers/process.py) samples the counter around it; a
command nested in an attempt that was the attempt's last and died for memory is noted here for its
worker, which puts it in the attempt's failed diagnosis (ascendbridge/workers/worker.py); a worker that died itself is judged by
the team lead (ascendbridge/teamlead/verdicts.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

RULE = "out_of_memory"
SIGKILL_EXITS = (-9, 137)
OUT_OF_MEMORY_TEXT = re.compile(
    r"DefaultCPUAllocator: can't allocate memory|CUDA out of memory|NPU out of memory|"
    r"OutOfMemoryError|\bMemoryError\b|out of memory|Cannot allocate memory"
)
TAIL_LINES = 5  # where a run's own out-of-memory error is (its traceback's last line, its RESULT)
_CGROUP_V1 = Path("/sys/fs/cgroup/memory")
_CGROUP_V2 = Path("/sys/fs/cgroup")
_VMSTAT = Path("/proc/vmstat")

_last: dict[str, Any] | None = None  # this process's last nested command, when it died for memory


def _counter(path: Path, name: str = "oom_kill") -> int | None:
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return None


def _own_cgroup(controller: str) -> str | None:
    """This process's cgroup path for `controller` ("" names cgroup v2's unified hierarchy)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(",") or (controller == "" and controllers == ""):
            return path.lstrip("/")
    return None


def oom_kill_count() -> int | None:
    """How many processes the OOM killer has killed: in this process's cgroup (v2 memory.events,
    v1 memory.oom_control), else on the host (/proc/vmstat); None where no counter is readable."""
    v2, v1 = _own_cgroup(""), _own_cgroup("memory")
    candidates = []
    if v2 is not None:
        candidates.append(_CGROUP_V2 / v2 / "memory.events")
    if v1 is not None:
        candidates.append(_CGROUP_V1 / v1 / "memory.oom_control")
    for path in [*candidates, _VMSTAT]:
        count = _counter(path)
        if count is not None:
            return count
    return None


def evidence(exit_code: int | None, timed_out: bool, oom_kills: int | None, tail: str) -> str | None:
    """Why a failed command is judged to have died for memory, in one phrase; None when nothing
    says so. `oom_kills`: how far the OOM killer's counter rose while it ran (None: no counter)."""
    if exit_code in (0, None) or timed_out:
        return None
    found = OUT_OF_MEMORY_TEXT.search("\n".join(tail.splitlines()[-TAIL_LINES:]))
    if found:
        return f"'{found.group(0)}' in its last output lines"
    if exit_code not in SIGKILL_EXITS:
        return None
    if oom_kills is None:
        return "killed by SIGKILL without a timeout or a stop; this host exposes no OOM-kill counter (suspected)"
    if oom_kills > 0:
        return f"killed by SIGKILL while the kernel's OOM killer killed {oom_kills} process(es)"
    return None


def note(what: str, death: str | None) -> None:
    """This process's latest nested command (`what`) ended; `death`: why it died for memory, or None.
    Only the last counts: a memory death a stage recovered from (a shrunk rerun) is no attempt's cause."""
    global _last
    _last = None if death is None else {"command": what, "evidence": death}


def take_last() -> dict[str, Any] | None:
    """The last nested command's memory death, if it was one (the worker's, for its attempt)."""
    global _last
    taken, _last = _last, None
    return taken


def diagnosis(failed: dict[str, Any], death: dict[str, Any]) -> dict[str, Any]:
    """The attempt's diagnosis as a memory death (`death`: the command and the evidence), the
    stage's own rule kept as `error_rule`; a refusal (ascendbridge/refusals.py) with its remedy."""
    kept = {key: value for key, value in failed.items() if key not in ("retryable", "remedy")}  # the table's
    return {
        **kept,
        "rule": RULE,
        "error_rule": failed.get("rule"),
        "summary": f"out of memory ({death['command']}: {death['evidence']}): {failed.get('summary', '')}",
        "memory_death": death,
    }
