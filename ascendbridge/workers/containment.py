"""Containment units: every process a task starts, at any depth, is found and killed with it.

One worker process per attempt leads its own process group; nothing below it starts another
session (run_command keeps children in the caller's group). Two environment markers travel to
every descendant because children inherit the environment:

- `ASCENDBRIDGE_ATTEMPT=<task>:<token>@<board>` names the attempt (set by the executor),
- `ASCENDBRIDGE_COMMAND=<id>` names one run_command call (set by run_command itself).

A process that escaped its group (a daemonising tool, a third-party `setsid`) or was reparented
after its parent died still carries both, so a sweep of /proc finds it. The machine offers no
writable cgroup here (checked: /sys/fs/cgroup is read-only to us), so markers plus a group kill
are the containment; see docs/teamlead.md "Containment".
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

ATTEMPT_ENV = "ASCENDBRIDGE_ATTEMPT"
COMMAND_ENV = "ASCENDBRIDGE_COMMAND"
TEAM_LEAD_PID_ENV = "ASCENDBRIDGE_TEAM_LEAD_PID"

_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class AttemptMarker:
    """Which attempt (task, fencing token) on which board a process works for."""

    task_id: int
    token: int
    board: str

    def __str__(self) -> str:
        return f"{self.task_id}:{self.token}@{self.board}"

    @classmethod
    def parse(cls, raw: str) -> AttemptMarker | None:
        ids, sep, board = raw.partition("@")
        task, colon, token = ids.partition(":")
        if not sep or not colon or not task.isdigit() or not token.isdigit():
            return None
        return cls(int(task), int(token), board)


def marker_for(board: Path, task_id: int, token: int) -> AttemptMarker:
    return AttemptMarker(task_id, token, str(Path(board).resolve()))


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux: the lease and the sweeps still contain
        return False


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send `sig` to this process when its parent (thread) exits."""
    return _prctl(_PR_SET_PDEATHSIG, int(sig))


def _environ(proc: psutil.Process) -> dict[str, str]:
    try:
        return proc.environ()
    except (psutil.Error, OSError):  # gone, zombie, or another user's process
        return {}


def find_marked(match: Callable[[dict[str, str]], bool], exclude: tuple[int, ...] = ()) -> list[psutil.Process]:
    """Live processes (of this user) whose environment satisfies `match`."""
    skip = {os.getpid(), *exclude}
    found = []
    for proc in psutil.process_iter():
        if proc.pid in skip:
            continue
        env = _environ(proc)
        if env and match(env):
            found.append(proc)
    return found


def attempt_processes(marker: AttemptMarker) -> list[psutil.Process]:
    text = str(marker)
    return find_marked(lambda env: env.get(ATTEMPT_ENV) == text)


def board_processes(board: Path) -> list[psutil.Process]:
    """Every process working for any attempt on `board` (for a team lead that starts or restarts)."""
    target = str(Path(board).resolve())

    def match(env: dict[str, str]) -> bool:
        marker = AttemptMarker.parse(env.get(ATTEMPT_ENV, ""))
        return marker is not None and marker.board == target

    return find_marked(match)


def command_processes(command_id: str) -> list[psutil.Process]:
    return find_marked(lambda env: env.get(COMMAND_ENV) == command_id)


def terminate(procs: list[psutil.Process], grace_s: float) -> int:
    """SIGTERM, wait up to `grace_s`, SIGKILL the rest; returns how many were signalled."""
    live = []
    for proc in procs:
        try:
            proc.send_signal(signal.SIGTERM if grace_s > 0 else signal.SIGKILL)
            live.append(proc)
        except psutil.Error:
            pass
    if grace_s > 0 and live:
        _, still = psutil.wait_procs(live, timeout=grace_s)
        for proc in still:
            try:
                proc.kill()
            except psutil.Error:
                pass
    return len(live)


def tree(pid: int) -> list[psutil.Process]:
    """`pid` and all its descendants (empty when it is gone)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def kill_attempt(marker: AttemptMarker, grace_s: float = 0.0) -> int:
    """Kill every process of one attempt, wherever it is in the process table."""
    return terminate(attempt_processes(marker), grace_s)


def kill_board_attempts(board: Path) -> int:
    """Kill every attempt process of `board`: only the holder of the board's team-lead lock (or its
    watchdog) calls this, when no attempt of it can be legitimately running."""
    return terminate(board_processes(board), 0.0)
