"""Run one command contained: own process group, wall-clock timeout, capped output.

Model code never runs in the team lead; everything goes through here so a crash, hang or flood
of output in a model run is contained and reported the same way everywhere.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Optional, Sequence

DEFAULT_OUTPUT_CAP = 4 * 1024 * 1024  # bytes kept in the log per command
KILL_GRACE_S = 5.0


@dataclass
class CommandResult:
    argv: list[str]
    exit_code: Optional[int]  # None when killed at the timeout
    duration_s: float
    timed_out: bool
    output: str  # combined stdout+stderr, capped (the tail is kept when truncated)
    truncated: bool

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.output.splitlines()[-lines:])


def kill_group(
    pgid: int, grace_s: float = KILL_GRACE_S, leader: Optional["subprocess.Popen[bytes]"] = None
) -> None:
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
    cwd: Optional[Path] = None,
    env: Optional[dict[str, str]] = None,
    timeout_s: float = 600.0,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    log: Optional[IO[str]] = None,
    on_start: Optional[Callable[[subprocess.Popen[bytes]], None]] = None,
) -> CommandResult:
    """Run `argv` in a new session (process group); stream output to `log` up to `output_cap`.

    `on_start` receives the live process (e.g. so a scheduler can stop its group on shutdown).
    """
    start = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        cwd=str(cwd) if cwd else None,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
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
        kill_group(proc.pid, leader=proc)
        proc.wait()
    finally:
        # Children that outlive the leader still hold the group; never leave them behind.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    pump.join(timeout=5)
    output = b"".join(chunks).decode("utf-8", "replace")
    if timed_out and log is not None:
        log.write(f"[killed after {timeout_s:.0f} s timeout]\n")
    return CommandResult(
        argv=list(argv),
        exit_code=None if timed_out else proc.returncode,
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
        output=output,
        truncated=truncated,
    )
