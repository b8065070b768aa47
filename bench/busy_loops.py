"""Busy loops: load a host the way other jobs on a shared build host or NPU server do.

CPU loops spin in pure Python; memory loops copy a buffer larger than the last-level cache over
and over (they take memory bandwidth, which a CPU loop does not; `memory_mib` is each loop's
footprint, two buffers of half that); a model loop (with an interpreter that has torch) runs a
memory-bound model's batch-1 forward over and over, as a benchmark of a larger model beside the
gate does (MODEL_LOOP: 0.2 B float32 parameters, 805 MB streamed per call, 2 torch threads). Each
loop is a real process in its own process group, stopped (SIGKILL, whole group) when the context
ends, also on an error or, run as a program, on SIGTERM.

Used by the tests and benches that show a verdict does not depend on the host's load, and by
people to run anything under that load:

    python bench/busy_loops.py --cpu 2 --memory 2 -- ./run_tests.sh
    python bench/busy_loops.py --cpu 2 --memory 2 --seconds 60
    python bench/busy_loops.py --cpu 4 --memory 2 --memory-mib 300 --model-python PYTHON --seconds 60
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
from pathlib import Path

CPU_LOOP = "while True: pass"
# Two buffers of {half} MiB copied back and forth: far beyond any cache, so every copy goes to memory.
MEMORY_LOOP = "a = bytearray({half} << 20)\nb = bytearray({half} << 20)\nwhile True:\n    b[:] = a\n    a[:] = b\n"
# Six up/down projections of 2048 x 8192 float32 weights: a batch-1 forward streams all 805 MB of them.
MODEL_LOOP = """import torch
torch.set_num_threads(2)
up = [torch.randn(2048, 8192) * 0.01 for _ in range(6)]
down = [torch.randn(8192, 2048) * 0.01 for _ in range(6)]
x0 = torch.randn(1, 2048)
with torch.inference_mode():
    while True:
        x = x0
        for u, d in zip(up, down):
            x = torch.relu(x @ u) @ d
"""


@contextlib.contextmanager
def busy_loops(
    cpu: int = 2, memory: int = 2, memory_mib: int = 128, model_python: Path | None = None
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Run `cpu` CPU loops, `memory` memory-copy loops of `memory_mib` MiB each and, with an
    interpreter that has torch (`model_python`), one model loop for the duration of the context."""
    memory_loop = MEMORY_LOOP.format(half=max(1, memory_mib // 2))
    commands = [[sys.executable, "-c", code] for code in [CPU_LOOP] * cpu + [memory_loop] * memory]
    if model_python is not None:
        commands.append([str(model_python), "-c", MODEL_LOOP])
    procs = [
        subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for command in commands
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
    parser.add_argument("--memory-mib", type=int, default=128, help="each memory loop's footprint (default 128)")
    parser.add_argument("--model-python", type=Path, help="an interpreter with torch: also run the model loop")
    parser.add_argument("--seconds", type=float, help="with no command: how long to run")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND...: run it under the load")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command and args.seconds is None:
        parser.error("give a command after -- or --seconds")
    if min(args.cpu, args.memory) < 0 or args.memory_mib < 2:
        parser.error("--cpu and --memory must be >= 0, --memory-mib >= 2")
    # A SIGTERM (a `kill`, a CI timeout) unwinds through the context, so the loops are stopped
    # too: by default it ended this process at once and left them spinning.
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    with busy_loops(args.cpu, args.memory, args.memory_mib, args.model_python):
        model = ", a model loop" if args.model_python else ""
        print(
            f"busy loops: {args.cpu} CPU, {args.memory} memory-copy of {args.memory_mib} MiB{model}",
            file=sys.stderr,
            flush=True,
        )
        if not command:
            time.sleep(args.seconds)
            return 0
        return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
