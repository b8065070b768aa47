#!/usr/bin/env python3
"""Scaling: tasks per minute and per-task overhead with 1, 2, 4 slots, local executor vs Ray.

The real scheduler and board, two stages: the trivial stage (bench/trivial_stage.py: nothing to
do, so a task's time is all orchestration) and the real discovery stage on the bundled demo model
configs (cheap: it reads files). Slots are the team lead's --workers; Ray tasks ask for one CPU
each (non-timed stages), on a one-node Ray cluster this bench starts on this machine (or the
cluster at --ray-address). Each configuration runs --reps times; figures are the median with the
min-max across repetitions; per-task time is dispatch -> recorded verdict (median of all tasks,
with p10-p90). One untimed warm-up run per executor first (Ray starts its worker processes then).

  uv run python bench/scaling_bench.py [--tasks 8] [--reps 2] [--slots 1,2,4] [--executors local,ray]
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ab_runtime.pairstats import percentile  # noqa: E402
from ascendbridge.board import BoardStore, Registration  # noqa: E402
from ascendbridge.stage_registry import StageRef, stage_refs  # noqa: E402
from ascendbridge.teamlead.settings import TeamLeadSettings  # noqa: E402
from ascendbridge.workers.executor import Executor, LocalProcessExecutor  # noqa: E402
from bench.orchestration_bench import TimedLead  # noqa: E402

STAGES = {"trivial": StageRef("discovery", "bench.trivial_stage:TRIVIAL", "env"), "discovery": None}
DEMO = ("tiny-bert", "tiny-gpt2", "tiny-llama", "tiny-t5")


def run_once(executor: Executor, stage: str, tasks: int, slots: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ab-scale-") as tmp:
        os.environ["ASCENDBRIDGE_LOGS"] = f"{tmp}/logs"
        os.environ["ASCENDBRIDGE_ADAPTATIONS"] = f"{tmp}/adaptations"
        store = BoardStore.init(Path(tmp) / "board.db")
        store.register_models(
            Registration(
                model_id=f"bench/{DEMO[i % len(DEMO)]}-{i:03d}",
                source="local",
                path=str(REPO / "demo_models" / DEMO[i % len(DEMO)]),
            )
            for i in range(tasks)
        )
        settings = TeamLeadSettings(stages=("discovery",), workers=slots, poll_s=0.05, heartbeat_s=5.0, lease_s=60.0)
        log = logging.getLogger("bench")
        log.addHandler(logging.NullHandler())
        log.propagate = False
        ref = STAGES[stage] or stage_refs()["discovery"]
        lead = TimedLead(store, settings, executor, {"discovery": ref}, log)
        start = time.perf_counter()
        stats = lead.run()
        wall = time.perf_counter() - start
        store.close()
    if stats.outcomes["completed"] != tasks:
        raise SystemExit(
            f"error: {stage} on {slots} slot(s): only {stats.outcomes['completed']}/{tasks} completed "
            f"({dict(stats.outcomes)})"
        )
    return {"per_min": 60 * tasks / wall, "per_task": lead.per_task}


def _spread(values: list[float], fmt: str) -> str:
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


def make_executor(kind: str, address: str | None) -> Executor:
    if kind == "local":
        return LocalProcessExecutor()
    from ascendbridge.workers.ray_executor import RayExecutor

    return RayExecutor(address)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=8, help="tasks per run")
    p.add_argument("--reps", type=int, default=2, help="runs per configuration (the spread)")
    p.add_argument("--slots", default="1,2,4")
    p.add_argument("--stages", default="trivial,discovery")
    p.add_argument("--executors", default="local,ray")
    p.add_argument("--ray-address", help="an existing Ray cluster (default: start a one-node one here)")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout still stops the cluster (finally)
    slots = [int(s) for s in args.slots.split(",")]
    cluster = None
    address = args.ray_address
    if "ray" in args.executors.split(",") and not address:
        from bench.support.ray_cluster import LocalRayCluster

        t = time.perf_counter()
        cluster = LocalRayCluster(npus_per_node=0, cpus_per_node=max(slots)).start(nodes=1)
        address = cluster.address
        print(f"one-node Ray cluster started in {time.perf_counter() - t:.0f} s", flush=True)
    load, cpus = os.getloadavg()[0], os.cpu_count() or 1
    busy = " (a busy machine: the figures measure its load too)" if load > cpus / 2 else ""
    print(f"cpus {cpus}, load average {load:.1f}{busy}", flush=True)
    print(
        f"{'executor':8s} {'stage':9s} {'slots':>5s}  {'tasks/min median [min-max]':>28s}  "
        f"{'per task ms median [p10-p90]':>30s}",
        flush=True,
    )
    try:
        for kind in args.executors.split(","):
            executor = make_executor(kind, address)
            try:
                run_once(executor, "trivial", max(slots), max(slots))  # warm-up, not reported: Ray starts its workers
                for stage in args.stages.split(","):
                    for n in slots:
                        runs = [run_once(executor, stage, args.tasks, n) for _ in range(args.reps)]
                        per_task = [1000 * t for r in runs for t in r["per_task"]]
                        print(
                            f"{kind:8s} {stage:9s} {n:5d}  {_spread([r['per_min'] for r in runs], '{:.0f}'):>28s}  "
                            f"{statistics.median(per_task):>12.0f} [{percentile(per_task, 10):.0f}-"
                            f"{percentile(per_task, 90):.0f}]",
                            flush=True,
                        )
            finally:
                executor.close()
    finally:
        if cluster is not None:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
