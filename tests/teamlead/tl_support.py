"""Helpers for team-lead tests: toy models on a board, running the team lead, checking the log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ascendbridge.board import BoardStore, Registration
from ascendbridge.stages import TERMINAL_STATUSES
from ascendbridge.workers.payload import WorkerJob
from tests.teamlead.toy_stages import ALL

FAST = ["--lease", "10", "--heartbeat", "1", "--poll", "0.2", "--plain"]


def add_models(
    store: BoardStore, behaviours: dict[str, dict[str, str]], priority: int = 0, skip: Sequence[str] = ()
) -> None:
    """Register toy models: each one's description is its behaviour per stage (toy_stages.py)."""
    store.register_models(
        Registration(
            model_id=mid,
            source="local",
            path="/nonexistent",
            description=json.dumps(b),
            priority=priority,
            skip_stages=list(skip),
        )
        for mid, b in behaviours.items()
    )


def tl_env(tmp: Path, extra: str = ALL) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        ASCENDBRIDGE_EXTRA_STAGES=extra,
        ASCENDBRIDGE_LOGS=str(tmp / "logs"),
        ASCENDBRIDGE_ADAPTATIONS=str(tmp / "adaptations"),
        PYTHONUNBUFFERED="1",
    )
    env.pop("PROMPT_MODE", None)
    return env


def tl_argv(board: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "ascendbridge.teamlead", "--board", str(board), *FAST, *args]


def run_tl(
    board: Path, tmp: Path, *args: str, extra: str = ALL, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        tl_argv(board, *args), env=tl_env(tmp, extra), capture_output=True, text=True, timeout=timeout
    )


def start_tl(board: Path, tmp: Path, *args: str, extra: str = ALL, out: Path | None = None) -> subprocess.Popen[str]:
    """Start a team lead in the background; with `out`, its output goes to that file (never blocks)."""
    stdout = out.open("a") if out else subprocess.PIPE
    return subprocess.Popen(
        tl_argv(board, *args),
        env=tl_env(tmp, extra),
        stdout=stdout,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def statuses(store: BoardStore) -> dict[tuple[str, str], str]:
    return {(t.model_id, t.stage): t.status for t in store.list_tasks()}


def children_of(pid: int) -> list[int]:
    """Direct children of `pid`, from /proc (the tests' own process tree only)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# Allowed task transitions in the event log, replayed per (model, stage).
_NEXT: dict[str, dict[str, str]] = {
    "waiting": {"pending": "pending", "skipped": "skipped"},
    "pending": {"claimed": "in_progress", "skipped": "skipped"},
    "in_progress": {
        "completed": "completed",
        "retry": "pending",
        "failed": "failed",
        "blocked": "blocked",
        "skipped": "skipped",
        "released": "pending",
        "lease_expired": "pending",
    },
    "failed": {"retry": "pending"},
    "blocked": {"retry": "pending"},
    "skipped": {"retry": "pending"},
    "completed": {},
}
TASK_EVENT_KINDS = {
    "pending",
    "claimed",
    "completed",
    "retry",
    "failed",
    "blocked",
    "skipped",
    "released",
    "lease_expired",
}


def check_event_log(store: BoardStore) -> Counter[tuple[str, str]]:
    """Replay every task's events through the state machine; it must end where the board says.

    Returns how many times each task was completed (callers assert exactly once)."""
    state: dict[tuple[str, str], str] = defaultdict(lambda: "waiting")
    completions: Counter[tuple[str, str]] = Counter()
    for ev in store.list_events(limit=10**9):
        if ev.stage is None or ev.kind not in TASK_EVENT_KINDS:
            continue
        key = (ev.model_id or "", ev.stage)
        if state[key] == "waiting" and ev.stage == "discovery":
            state[key] = "pending"  # the first stage is pending from registration
        nxt = _NEXT[state[key]].get(ev.kind)
        assert nxt is not None, f"{key}: event {ev.kind} not allowed in state {state[key]} ({ev.message})"
        state[key] = nxt
        if ev.kind == "completed":
            completions[key] += 1
    for key, status in statuses(store).items():
        replayed = state[key] if key in state else ("pending" if key[1] == "discovery" else "waiting")
        assert replayed == status, f"{key}: events say {replayed}, board says {status}"
    return completions


def all_terminal(store: BoardStore, stages: set[str] | None = None) -> bool:
    return all(t.status in TERMINAL_STATUSES for t in store.list_tasks() if stages is None or t.stage in stages)


def attempts(store: BoardStore, model_id: str, stage: str) -> list[Any]:
    return [a for _, a in store.list_attempts(model_id, stage)]


def procs_in(folder: Path) -> list[int]:
    """Live processes whose working directory is under `folder` (a test's workers and children)."""
    folder = folder.resolve()
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        if (cwd == folder or folder in cwd.parents) and alive(int(entry.name)):
            out.append(int(entry.name))
    return out


def wait_for(
    predicate: Callable[[], object], timeout: float = 60.0, interval: float = 0.2, what: str = "condition"
) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def runs_logged(tmp: Path, model_id: str, line: str) -> bool:
    from ascendbridge.naming import base_adaptation_name

    name = base_adaptation_name(model_id)  # the promoted directory, or an attempt's staging copy
    paths = [
        tmp / "adaptations" / name / "runs.log",
        *(tmp / "adaptations" / ".attempts").glob(f"{name}.*/{name}/runs.log"),
    ]
    return any(line in _read(path) for path in paths)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:  # a staging copy discarded while we looked
        return ""


def max_in_flight(store: BoardStore, stage: str | None = None) -> int:
    """The most tasks (of `stage`, or of any stage) that were in progress at once, from the events."""
    running: set[tuple[str, str]] = set()
    most = 0
    for ev in store.list_events(limit=10**9):
        if ev.stage is None or (stage is not None and ev.stage != stage):
            continue
        key = (ev.model_id or "", ev.stage)
        if ev.kind == "claimed":
            running.add(key)
            most = max(most, len(running))
        elif ev.kind in TASK_EVENT_KINDS:
            running.discard(key)
    return most


def claimed_job(store: BoardStore, model_id: str, stage: str, work: Path, result: Path, **fields: Any) -> WorkerJob:
    """A run-phase WorkerJob for the first task of `model_id`, claimed as the team lead would."""
    task = store.claim_task(store.list_tasks(model_id=model_id)[0].id, "test-owner", lease_s=60)
    fields.setdefault("board", store.path)
    return WorkerJob(
        phase="run",
        stage=stage,
        task=task,
        model=store.get_model(model_id),
        worker_id="test.w1",
        adaptation_dir=work,
        result=result,
        **fields,
    )
