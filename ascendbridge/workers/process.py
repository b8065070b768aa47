"""Run one command contained: wall-clock timeout, capped output, nothing left running after it.

Model code never runs in the team lead; everything goes through here so a crash, hang or flood
of output in a model run is contained and reported the same way everywhere. Only the executor
starts a new session (one per attempt: the containment unit); a nested command stays in its
caller's process group, so a group kill of the attempt reaches it. Each command carries its own
marker in its environment (ascendbridge.workers.containment), and whatever still carries it when
the command ends (or times out) is killed, even a process that left the group.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ascendbridge.workers import oom
from ascendbridge.workers.containment import ATTEMPT_ENV, COMMAND_ENV, command_processes, terminate, tree

DEFAULT_OUTPUT_CAP = 4 * 1024 * 1024  # bytes kept in the log per command
KILL_GRACE_S = 5.0


@dataclass
class CommandResult:
    argv: list[str]
    exit_code: int | None  # None when killed at the timeout
    duration_s: float
    timed_out: bool
    output: str  # combined stdout+stderr, capped (the tail is kept when truncated)
    truncated: bool
    oom_kills: int | None = None  # how far the OOM killer's counter rose while it ran (None: no counter)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.output.splitlines()[-lines:])

    def why_failed(self, result: dict[str, Any] | None = None) -> str:
        """Why a model run failed, in one phrase: its RESULT's own `error`, else the timeout or the exit code."""
        return (result or {}).get("error") or ("timed out" if self.timed_out else f"exit {self.exit_code}")

    def memory_death(self) -> str | None:
        """Why it is judged to have died for memory (ascendbridge/workers/oom.py); None when not."""
        return oom.evidence(self.exit_code, self.timed_out, self.oom_kills, self.tail(oom.TAIL_LINES))

    def tail_line(self, lines: int = 2) -> str:
        """The last non-empty output lines as ONE line, for errors that must stay one line."""
        return " | ".join([ln.strip() for ln in self.output.splitlines() if ln.strip()][-lines:])


def kill_group(pgid: int, grace_s: float = KILL_GRACE_S, leader: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM the whole group, then SIGKILL whatever is still alive after the grace period.

    Pass the group's `leader` when we are its parent: it is reaped while we wait, otherwise its
    zombie keeps the group "alive" and the full grace period is spent for nothing.
    """
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if leader is not None:
            leader.poll()
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_command(
    argv: Sequence[str],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float = 600.0,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    log: IO[str] | None = None,
    on_start: Callable[[subprocess.Popen[bytes]], None] | None = None,
    new_session: bool = False,
) -> CommandResult:
    """Run `argv`; stream output to `log` up to `output_cap`; kill all it started when it ends.

    `new_session` makes the command a containment unit of its own (the executor's worker only,
    which judges its worker's death itself); a nested command's memory death is noted for the
    worker's diagnosis (oom.note). `on_start` receives the live process (e.g. so a scheduler
    can stop its group on shutdown).
    """
    start = time.monotonic()
    oom_before = oom.oom_kill_count()
    command_id = uuid.uuid4().hex
    child_env = dict(os.environ if env is None else env)
    child_env[COMMAND_ENV] = command_id
    if ATTEMPT_ENV in os.environ:  # a caller's scrubbed environment must not drop the attempt's marker
        child_env.setdefault(ATTEMPT_ENV, os.environ[ATTEMPT_ENV])
    proc = subprocess.Popen(
        list(argv),
        cwd=str(cwd) if cwd else None,
        env=child_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=new_session,
    )
    if on_start is not None:
        on_start(proc)
    chunks: list[bytes] = []
    kept = 0
    truncated = False
    written = 0

    def _pump() -> None:
        nonlocal kept, truncated, written
        assert proc.stdout is not None
        for line in iter(proc.stdout.readline, b""):
            chunks.append(line)
            kept += len(line)
            while kept > output_cap and len(chunks) > 1:
                kept -= len(chunks.pop(0))
                truncated = True
            if log is not None and written < output_cap:
                text = line.decode("utf-8", "replace")
                log.write(text)
                log.flush()
                written += len(line)
                if written >= output_cap:
                    log.write(f"[output capped at {output_cap} bytes]\n")

    pump = threading.Thread(target=_pump, daemon=True)
    pump.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        if new_session:
            kill_group(proc.pid, leader=proc)
        else:  # our own group holds the caller too: kill only this command's tree
            terminate(tree(proc.pid) + command_processes(command_id), KILL_GRACE_S)
        proc.wait()
    finally:
        # Children that outlive the leader (in the group, or escaped from it) never stay behind.
        if new_session:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        terminate(command_processes(command_id), 0.0)  # the leader is reaped: its pid may be reused
    pump.join(timeout=5)
    output = b"".join(chunks).decode("utf-8", "replace")
    if timed_out and log is not None:
        log.write(f"[killed after {timeout_s:.0f} s timeout]\n")
    oom_after = oom.oom_kill_count()
    result = CommandResult(
        argv=list(argv),
        exit_code=None if timed_out else proc.returncode,
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
        output=output,
        truncated=truncated,
        oom_kills=None if oom_before is None or oom_after is None else oom_after - oom_before,
    )
    if not new_session:
        oom.note(shlex.join(list(argv))[:200], result.memory_death())
    return result
