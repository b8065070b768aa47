"""bench/busy_loops.py stops its loops however it ends: a killed load generator must not leave
processes spinning on a shared host."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time

import psutil

from ascendbridge.config import REPO_ROOT


def test_sigterm_stops_the_loops_too() -> None:
    proc = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "bench" / "busy_loops.py"), "--cpu", "1", "--memory", "0", "--seconds", "120"]
    )
    loops: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 30
        while not loops and time.monotonic() < deadline:
            loops = psutil.Process(proc.pid).children()
            time.sleep(0.2)
        assert loops, "no busy loop started"
        time.sleep(1)  # past the start check: the loops run
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
        _, alive = psutil.wait_procs(loops, timeout=10)
        assert alive == []
    finally:
        for p in [*loops, proc]:
            with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
                p.kill()
