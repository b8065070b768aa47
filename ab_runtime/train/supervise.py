"""Run a training command under a hang watch: no heartbeat for k x the median step time is a hang;
the run is killed (its whole process tree), restarted with --resume, and the hang counted.

    python -m ab_runtime.train.supervise --out DIR [--k 10] [--max-restarts 2] -- CMD ...

CMD is the training command (e.g. `python -m ab_runtime.train.run train ...` or a torchrun line);
`--resume` is appended on a restart. A run that exits by itself (done, or stopped by a guard) is
never restarted: only a hang, or a kill by a signal, is resumed. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HEARTBEAT = "heartbeat.json"
METRICS = "metrics.jsonl"
STOPPED = "stopped.json"  # run.py writes a guard's diagnosis there before it exits
MIN_HANG_S = 5.0  # never call a hang sooner than this, however fast the steps are


def step_times(out: Path) -> list[float]:
    path = out / METRICS
    if not path.exists():
        return []
    return [float(json.loads(line)["step_time_s"]) for line in path.read_text().splitlines() if line.strip()]


def last_beat(out: Path) -> tuple[float, str] | None:
    """(time, phase) of the last heartbeat, or None before the first."""
    try:
        beat = json.loads((out / HEARTBEAT).read_text())
        return float(beat["time"]), str(beat.get("phase", "train"))
    except (OSError, ValueError, KeyError):
        return None


def hang_limit(out: Path, k: float, startup_s: float) -> float:
    """Seconds without a step that count as a hang: k x the median step time once steps exist."""
    times = step_times(out)
    return max(MIN_HANG_S, k * statistics.median(times)) if times else startup_s


def stopping(out: Path, started: float) -> bool:
    """True once the run started at `started` has written its guard's diagnosis (run.py's stopped.json)."""
    try:
        return (out / STOPPED).stat().st_mtime >= started
    except OSError:
        return False


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, read from /proc (Linux). torchrun starts each worker in a session
    of its own, so killing the launcher's process group leaves the workers running."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the run's process group and every process below it (torchrun's workers included)."""
    below = descendants(proc.pid)
    for pid in [proc.pid, *below]:
        for kill in (lambda p: os.killpg(p, signal.SIGKILL), lambda p: os.kill(p, signal.SIGKILL)):
            try:
                kill(pid)
            except (ProcessLookupError, PermissionError):
                pass
    proc.wait()


def supervise(
    cmd: list[str], out: Path, k: float = 10.0, max_restarts: int = 2, startup_s: float = 300.0, poll_s: float = 0.2
) -> dict[str, Any]:
    """Run `cmd` until it exits by itself or the restarts are spent; returns {exit_code, hangs, restarts, events}."""
    out.mkdir(parents=True, exist_ok=True)
    events: list[dict[str, Any]] = []
    restarts = hangs = 0
    command = list(cmd)
    while True:
        started = time.time()
        proc = subprocess.Popen(command, start_new_session=True)
        hung = False
        while proc.poll() is None:
            time.sleep(poll_s)
            beat = last_beat(out)
            fresh = beat is not None and beat[0] >= started  # a heartbeat of this start
            since = time.time() - (beat[0] if fresh and beat is not None else started)
            # the step clock applies between steps; loading, checkpoints, evaluation and the exit of a run a
            # guard stopped (its stopped.json written by this start: it ends by itself) get startup_s
            stepping = fresh and beat is not None and beat[1] == "train" and not stopping(out, started)
            limit = hang_limit(out, k, startup_s) if stepping else startup_s
            if since > limit:
                hung = True
                kill_group(proc)
                hangs += 1
                events.append(
                    {
                        "event": "hang",
                        "seconds_without_step": round(since, 2),
                        "limit_s": round(limit, 2),
                        "last_step": _last_step(out),
                    }
                )
        code = proc.returncode
        if not hung and code >= 0:
            return {"exit_code": code, "hangs": hangs, "restarts": restarts, "events": events}
        if not hung:
            events.append({"event": "killed", "signal": -code, "last_step": _last_step(out)})
        if restarts >= max_restarts:
            return {"exit_code": code if code else 1, "hangs": hangs, "restarts": restarts, "events": events}
        restarts += 1
        if "--resume" not in command:
            command.append("--resume")


def _last_step(out: Path) -> int | None:
    try:
        return int(json.loads((out / HEARTBEAT).read_text())["step"])
    except (OSError, ValueError, KeyError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the run's output directory (heartbeat, metrics)")
    parser.add_argument("--k", type=float, default=10.0, help="a hang is no step for k x the median step time")
    parser.add_argument("--max-restarts", type=int, default=2)
    parser.add_argument("--startup-s", type=float, default=300.0, help="seconds allowed before the first step")
    parser.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        parser.error("give the training command after --")
    summary = supervise(cmd, args.out, args.k, args.max_restarts, args.startup_s)
    (args.out / "supervision.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    print(json.dumps(summary, sort_keys=True))
    return int(summary["exit_code"])


if __name__ == "__main__":
    sys.exit(main())
