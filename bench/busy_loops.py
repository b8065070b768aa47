"""Busy loops: load a host the way other jobs on a shared build host or NPU server do.

CPU loops spin in pure Python; memory loops copy a buffer larger than the last-level cache over
and over (they take memory bandwidth, which a CPU loop does not). Each loop is a real process in
its own process group, stopped (SIGKILL, whole group) when the context ends, also on an error
or, run as a program, on SIGTERM.

Used by the tests and benches that show a verdict does not depend on the host's load, and by
people to run anything under that load:

    python bench/busy_loops.py --cpu 2 --memory 2 -- ./run_tests.sh
    python bench/busy_loops.py --cpu 2 --memory 2 --seconds 60
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence

CPU_LOOP = "while True: pass"
# 64 MiB copied back and forth: far beyond any cache, so every copy goes to memory.
MEMORY_LOOP = "a = bytearray(64 << 20)\nb = bytearray(64 << 20)\nwhile True:\n    b[:] = a\n    a[:] = b\n"


@contextlib.contextmanager
def busy_loops(cpu: int = 2, memory: int = 2) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Run `cpu` CPU loops and `memory` memory-copy loops for the duration of the context."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for code in [CPU_LOOP] * cpu + [MEMORY_LOOP] * memory
    ]
    try:
        time.sleep(0.5)  # the memory loops have allocated and are copying
        dead = [p.pid for p in procs if p.poll() is not None]
        if dead:
            raise RuntimeError(f"{len(dead)} busy loop(s) exited at start (pid {dead[0]})")
        yield procs
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
        for p in procs:
            p.wait()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run busy loops beside a command (or for --seconds)")
    parser.add_argument("--cpu", type=int, default=2, help="CPU loops (default 2)")
    parser.add_argument("--memory", type=int, default=2, help="memory-copy loops (default 2)")
    parser.add_argument("--seconds", type=float, help="with no command: how long to run")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND...: run it under the load")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command and args.seconds is None:
        parser.error("give a command after -- or --seconds")
    if min(args.cpu, args.memory) < 0:
        parser.error("--cpu and --memory must be >= 0")
    # A SIGTERM (a `kill`, a CI timeout) unwinds through the context, so the loops are stopped
    # too: by default it ended this process at once and left them spinning.
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    with busy_loops(args.cpu, args.memory):
        print(f"busy loops: {args.cpu} CPU, {args.memory} memory-copy", file=sys.stderr, flush=True)
        if not command:
            time.sleep(args.seconds)
            return 0
        return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
