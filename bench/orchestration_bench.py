#!/usr/bin/env python3
"""Orchestration overhead: what the team lead costs per task, with stages that do nothing.

Two executors are measured with the same scheduler, board and trivial stage:
  * in-process (BENCH ONLY, no isolation: run and gate are called in a thread of the team lead)
    isolates the scheduler + board cost per task (claim, attempt rows, gate verdict, completion);
  * local-process (the real one: a worker subprocess for the run and another for the gate)
    adds what process isolation costs.
Throughput is reported for 1..8 workers. Per task: the median wall time from dispatch to the
recorded completion, wall time of the whole run / tasks, and CPU time (team-lead process, worker
processes), which does not depend on how loaded the machine is.

  uv run python bench/orchestration_bench.py [--tasks 1000] [--process-tasks 24] [--workers 1,2,4,8]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ascendbridge.board import BoardStore, Registration  # noqa: E402
from ascendbridge.stage_api import StageContext  # noqa: E402
from ascendbridge.stage_registry import StageRef, load_stage  # noqa: E402
from ascendbridge.teamlead.scheduler import TeamLead  # noqa: E402
from ascendbridge.teamlead.settings import TeamLeadSettings  # noqa: E402
from ascendbridge.workers.executor import Executor, Job, JobResult, LocalProcessExecutor, PhaseResult  # noqa: E402

TRIVIAL = StageRef("discovery", "bench.trivial_stage:TRIVIAL", "register")


class InProcessExecutor(Executor):
    """BENCH ONLY: runs run() and gate() in threads of the team lead. No isolation, no timeout."""

    def __init__(self, workers: int) -> None:
        self.pool = ThreadPoolExecutor(max_workers=workers)
        self.done: list[JobResult] = []
        self.cond = threading.Condition()
        self.count = 0

    def submit(self, job: Job) -> None:
        self.count += 1
        self.pool.submit(self._run, job)

    def _run(self, job: Job) -> None:
        start = time.monotonic()
        stage = load_stage(job.ref)
        job.log_path.parent.mkdir(parents=True, exist_ok=True)
        with job.log_path.open("a") as log:
            ctx = StageContext(job.model, job.task, job.adaptation_dir, job.board_path, log, job.attempt)
            out = stage.run(ctx)
            verdict = stage.gate(ctx)
        took = time.monotonic() - start
        result = JobResult(job, PhaseResult(0, took, False, out), PhaseResult(0, 0.0, False, verdict), False, took)
        with self.cond:
            self.done.append(result)
            self.cond.notify()

    def collect(self, timeout_s: float) -> list[JobResult]:
        with self.cond:
            if not self.done and timeout_s > 0:
                self.cond.wait(timeout_s)
            out, self.done = self.done, []
        self.count -= len(out)
        return out

    def in_flight(self) -> int:
        return self.count

    def cancel(self, job: Job) -> None:
        """A thread cannot be stopped: the bench's leases are never lost (one team lead, no people)."""

    def stop(self) -> None:
        self.pool.shutdown(wait=True)


class TimedLead(TeamLead):
    """The real scheduler, timing each task from dispatch to its recorded completion."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.t0: dict[int, float] = {}
        self.per_task: list[float] = []

    def _start(self, job: Job, slot: int) -> None:
        self.t0[job.task.id] = time.perf_counter()
        super()._start(job, slot)

    def _finish(self, result: JobResult) -> None:
        super()._finish(result)
        self.per_task.append(time.perf_counter() - self.t0.pop(result.job.task.id))


def run_once(kind: str, tasks: int, workers: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ab-bench-") as tmp:
        os.environ["ASCENDBRIDGE_LOGS"] = f"{tmp}/logs"
        os.environ["ASCENDBRIDGE_ADAPTATIONS"] = f"{tmp}/adaptations"
        store = BoardStore.init(Path(tmp) / "board.db")
        store.register_models(Registration(model_id=f"bench/m{i:05d}", source="local", path="/x") for i in range(tasks))
        settings = TeamLeadSettings(stages=("discovery",), workers=workers, poll_s=0.05, heartbeat_s=5.0, lease_s=60.0)
        log = logging.getLogger("bench")
        log.addHandler(logging.NullHandler())
        log.propagate = False
        executor = InProcessExecutor(workers) if kind == "in-process" else LocalProcessExecutor()
        lead = TimedLead(store, settings, executor, {"discovery": TRIVIAL}, log)
        start, cpu0, kids0 = time.perf_counter(), time.process_time(), _children_cpu()
        stats = lead.run()
        wall = time.perf_counter() - start
        cpu, kids = time.process_time() - cpu0, _children_cpu() - kids0
        completed = stats.outcomes["completed"]
        if isinstance(executor, InProcessExecutor):
            executor.stop()
        store.close()
    assert completed == tasks, f"only {completed}/{tasks} completed"
    per = sorted(lead.per_task)
    return {
        "tasks": tasks,
        "workers": workers,
        "wall_s": wall,
        "tasks_per_s": tasks / wall,
        "median_ms": 1000 * statistics.median(per),
        "p90_ms": 1000 * per[int(0.9 * (len(per) - 1))],
        "wall_per_task_ms": 1000 * wall / tasks,
        "lead_cpu_ms_per_task": 1000 * cpu / tasks,
        "worker_cpu_ms_per_task": 1000 * kids / tasks,
    }


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def worker_startup_s(samples: int = 3) -> float:
    """What one worker process costs before any stage code runs (interpreter + imports)."""
    times = []
    for _ in range(samples):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import ascendbridge.workers.worker"], check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=1000, help="tasks for the in-process runs")
    p.add_argument("--process-tasks", type=int, default=24, help="tasks for the subprocess runs")
    p.add_argument("--workers", default="1,2,4,8")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    results: dict[str, Any] = {"cpus": os.cpu_count(), "load_avg": os.getloadavg()[0]}
    print(f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}", flush=True)
    rows = []
    for kind, n in (("in-process", args.tasks), ("local-process", args.process_tasks)):
        for w in workers:
            r = run_once(kind, n, w)
            r["executor"] = kind
            rows.append(r)
            print(
                f"{kind:13s} workers={w} tasks={n:5d}  median {r['median_ms']:8.1f} ms/task (dispatch->completed), "
                f"p90 {r['p90_ms']:8.1f} ms, {r['tasks_per_s']:7.1f} tasks/s, wall/task {r['wall_per_task_ms']:7.1f} ms, "
                f"CPU/task: team lead {r['lead_cpu_ms_per_task']:6.1f} ms + workers {r['worker_cpu_ms_per_task']:7.1f} ms",
                flush=True,
            )
    results["runs"] = rows
    results["worker_process_startup_s"] = worker_startup_s()
    print(
        f"one worker process start (interpreter + ascendbridge/sqlmodel imports): "
        f"{results['worker_process_startup_s'] * 1000:.0f} ms; a task starts two (run, gate)"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
