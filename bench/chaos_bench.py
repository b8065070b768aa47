#!/usr/bin/env python3
"""Chaos and load on one board: containment under many kills, then lock errors under contention.

    uv run bench/chaos_bench.py [--kills 30] [--seed 19] [--models 6] [--load-s 120] [--json]

Kill phase: a watchdog keeps a team lead running the discovery and adaptation stages of
tests/chaos/chaos_stages.py (a real uv sync, a timed loop that writes six files one by one and
starts a daemonised child) on the demo models' ids. --kills times, at a seeded random moment,
it SIGKILLs the team lead (the watchdog restarts it), a worker, or a stage's grandchild, then
counts processes of the killed attempts still alive 15 s later (found by their
ASCENDBRIDGE_ATTEMPT marker in /proc). When all models are through, it counts tasks lost (not
terminal), duplicate completions (event log) and half-written adaptation directories.

Load phase: 8 claim workers (claim, heartbeat, complete), the real dashboard server polled by
2 reader threads, and board_ops.py CLI writers (set_priority, guide) on one board for --load-s
seconds; prints lock errors any of them surfaced to a user (target 0) and the p99 claim latency.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from ascendbridge.board import BoardError, BoardStore, Registration  # noqa: E402
from ascendbridge.demo_models import list_demo_models  # noqa: E402
from ascendbridge.stages import TERMINAL_STATUSES  # noqa: E402
from ascendbridge.teamlead.lock import lock_path_for  # noqa: E402

ATTEMPT_ENV = b"ASCENDBRIDGE_ATTEMPT="
CHAOS_STAGES = "discovery=tests.chaos.chaos_stages:DISCOVERY,adaptation=tests.chaos.chaos_stages:ADAPTATION"
PARTS = 6


def marked(board: Path) -> dict[int, str]:
    """pid -> attempt marker of every live process working for `board`."""
    suffix = "@" + str(board.resolve())
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            items = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for item in items:
            if item.startswith(ATTEMPT_ENV) and item.decode(errors="replace").endswith(suffix):
                out[int(entry.name)] = item[len(ATTEMPT_ENV) :].decode()
    return out


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def env_for(tmp: Path) -> dict[str, str]:
    env = dict(
        os.environ,
        ASCENDBRIDGE_EXTRA_STAGES=CHAOS_STAGES,
        ASCENDBRIDGE_LOGS=str(tmp / "logs"),
        ASCENDBRIDGE_ADAPTATIONS=str(tmp / "adaptations"),
        CHAOS_PIDS=str(tmp / "pids"),
        PYTHONUNBUFFERED="1",
        PYTHONPATH=str(REPO_ROOT),
    )
    env.pop("PROMPT_MODE", None)
    return env


def half_written(tmp: Path, store: BoardStore) -> list[str]:
    bad = []
    for model in store.list_models():
        state = tmp / "adaptations" / model.adaptation_name / "state"
        parts = list(state.glob("part-*.txt")) if state.is_dir() else []
        if parts and (len(parts) != PARTS or len({p.read_text() for p in parts}) != 1):
            bad.append(model.model_id)
    return bad


def _tasks(store: BoardStore) -> list[Any]:
    return [t for t in store.list_tasks() if t.stage in ("discovery", "adaptation")]


def kill_phase(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)
    board_path = tmp / "board.db"
    store = BoardStore.init(board_path)
    ids = [m.model_id for m in list_demo_models()][: args.models]
    store.register_models(
        Registration(
            model_id=m, source="local", path="/nonexistent", description=json.dumps({"hold": 0.3, "uv": i % 2 == 0})
        )
        for i, m in enumerate(ids)
    )
    dog = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ascendbridge.teamlead.watchdog",
            "--board",
            str(board_path),
            "--check-every",
            "0.5",
            "--stale-after",
            "60",
            "--max-backoff",
            "2",
            "--",
            "--stages",
            "discovery,adaptation",
            "--workers",
            "2",
            "--lease",
            "10",
            "--heartbeat",
            "1",
            "--poll",
            "0.2",
            "--plain",
            "--max-interruptions",
            "1000",
        ],
        cwd=REPO_ROOT,
        env=env_for(tmp),
        stdout=(tmp / "watchdog.out").open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    kills: Counter[str] = Counter()
    orphans = 0
    began = time.monotonic()
    try:
        for n in range(args.kills):
            deadline = time.monotonic() + 120
            while not marked(board_path) and time.monotonic() < deadline:
                if all(t.status in TERMINAL_STATUSES for t in _tasks(store)):
                    for mid in ids:  # everything is through: run it again, kills need work to land in
                        store.rollback(mid, "discovery", origin="chaos-bench")
                time.sleep(0.1)
            time.sleep(rng.uniform(0.0, 1.0))
            procs = marked(board_path)
            if not procs:
                continue
            kind = rng.choice(["team-lead", "worker", "grandchild"])
            workers = [p for p in procs if b"ascendbridge.workers.worker" in cmdline(p)]
            others = [p for p in procs if p not in workers]
            if kind == "team-lead":
                try:
                    victim, doomed = int(lock_path_for(board_path).read_text()), set(procs.values())
                except (OSError, ValueError):
                    continue
            elif kind == "worker" and workers:
                victim = rng.choice(workers)
                doomed = {procs[victim]}
            elif others:
                kind, victim = "grandchild", rng.choice(others)
                doomed = set()  # a killed grandchild fails its command; the attempt itself goes on
            else:
                continue
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                continue
            kills[kind] += 1
            if doomed:
                time.sleep(15)
                orphans += sum(1 for m in marked(board_path).values() if m in doomed)
            print(f"kill {n + 1}/{args.kills}: {kind} pid {victim}; orphans so far {orphans}", flush=True)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not all(t.status in TERMINAL_STATUSES for t in _tasks(store)):
            time.sleep(0.5)
    finally:
        dog.send_signal(signal.SIGTERM)
        dog.wait(timeout=120)
    completions: Counter[tuple[str, str]] = Counter()
    for ev in store.list_events(limit=10**9):
        if ev.kind == "completed":
            completions[(ev.model_id or "", ev.stage or "")] += 1
    rollbacks = Counter(
        (e.model_id or "", e.stage or "") for e in store.list_events(limit=10**9) if e.kind == "rollback"
    )
    tasks = _tasks(store)
    result = {
        "kills": sum(kills.values()),
        "kills_by_kind": dict(kills),
        "orphans": orphans + len(marked(board_path)),
        "tasks_lost": sum(1 for t in tasks if t.status not in TERMINAL_STATUSES),
        "duplicate_completions": sum(1 for k, c in completions.items() if c > 1 + rollbacks[k]),
        "half_written_dirs": len(half_written(tmp, store)),
        "failed": sum(1 for t in tasks if t.status == "failed"),
        "wall_s": round(time.monotonic() - began, 1),
    }
    store.close()
    return result


CLAIMER = """
import json, sys, time
from ascendbridge.board import BoardStore, BoardError
store, owner = BoardStore(sys.argv[1]), sys.argv[2]
until = time.time() + float(sys.argv[3])  # from this process's start: imports are slow on a busy machine
lat, errors = [], []
while time.time() < until:
    t0 = time.perf_counter()
    try:
        task = store.claim_next(owner, 30, ["discovery"])
        lat.append(time.perf_counter() - t0)
        if task is None:
            time.sleep(0.05); continue
        store.heartbeat_task(task.id, task.fencing_token, 30)
        store.complete_task(task.id, task.fencing_token, {"by": owner})
    except BoardError as exc:
        errors.append(str(exc))
print(json.dumps({"lat": lat, "errors": errors}))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def load_phase(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import httpx

    board_path = tmp / "load.db"
    store = BoardStore.init(board_path)
    store.register_models(Registration(model_id=f"load/m{i}") for i in range(args.load_models))
    env = env_for(tmp)
    claimers = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIMER, str(board_path), f"w{i}", str(args.load_s)],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(8)
    ]
    port = free_port()
    dash = subprocess.Popen(
        [sys.executable, "-m", "dashboard", "--board", str(board_path), "--port", str(port)],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    user_errors: list[str] = []
    reads = Counter[str]()

    def reader() -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            started = time.monotonic() + 120
            while time.monotonic() < started:  # wait for the server to answer, then read for --load-s
                try:
                    client.get("/healthz")
                    break
                except httpx.HTTPError:
                    time.sleep(0.2)
            until = time.time() + args.load_s
            while time.time() < until:
                for path in ("/api/overview", "/api/models", "/api/events"):
                    try:
                        r = client.get(path)
                    except httpx.HTTPError:
                        time.sleep(0.2)  # the server may still be starting
                        continue
                    reads[str(r.status_code)] += 1
                    if r.status_code >= 500 or "database is locked" in r.text:  # ("blocked" is a status)
                        user_errors.append(f"dashboard {path}: {r.status_code} {r.text[:200]}")

    def writer(n: int) -> None:
        rng = random.Random(n)
        until = time.time() + args.load_s
        while time.time() < until:
            mid = f"load/m{rng.randrange(args.load_models)}"
            cmd = (
                ["set_priority", mid, str(rng.randrange(5))]
                if rng.random() < 0.5
                else ["guide", mid, "chaos bench guidance"]
            )
            res = subprocess.run(
                [sys.executable, "-m", "ascendbridge.cli.board_ops", "--board", str(board_path), *cmd],
                cwd=REPO_ROOT,
                env=env,
                capture_output=True,
                text=True,
            )
            if res.returncode != 0 and ("database is locked" in res.stderr or "is busy" in res.stderr):
                user_errors.append(f"cli {' '.join(cmd)}: {res.stderr.strip()[:200]}")

    threads = [threading.Thread(target=reader) for _ in range(2)] + [
        threading.Thread(target=writer, args=(i,)) for i in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if not reads:
        user_errors.append("the dashboard never answered")
    latencies: list[float] = []
    for proc in claimers:
        out, _ = proc.communicate(timeout=120)
        data = json.loads(out.strip().splitlines()[-1])
        latencies += data["lat"]
        user_errors += [f"claimer: {e}" for e in data["errors"]]
    dash.terminate()
    dash.wait(timeout=30)
    latencies.sort()
    p99 = latencies[int(0.99 * (len(latencies) - 1))] if latencies else None
    store.close()
    return {
        "load_s": args.load_s,
        "claims": len(latencies),
        "dashboard_reads": sum(reads.values()),
        "lock_errors_surfaced": len(user_errors),
        "lock_error_examples": user_errors[:3],
        "p99_claim_latency_ms": round(p99 * 1000, 1) if p99 is not None else None,
        "median_claim_latency_ms": round(statistics.median(latencies) * 1000, 1) if latencies else None,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kills", type=int, default=30)
    p.add_argument("--seed", type=int, default=19)
    p.add_argument("--models", type=int, default=6, help="demo models on the kill board")
    p.add_argument("--load-s", type=float, default=180.0, help="seconds of the load phase (0: skip it)")
    p.add_argument("--load-models", type=int, default=2000)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.kills < 0 or args.load_s < 0:
        print("error: --kills and --load-s must not be negative", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ab-chaos-bench-") as raw:
        tmp = Path(raw)
        try:
            result = {
                "kill_phase": kill_phase(args, tmp) if args.kills else None,
                "load_phase": load_phase(args, tmp) if args.load_s else None,
            }
        except BoardError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for phase, figures in result.items():
            if figures:
                print(f"{phase}: " + ", ".join(f"{k}={v}" for k, v in figures.items()))
    kp, lp = result["kill_phase"] or {}, result["load_phase"] or {}
    bad = sum(kp.get(k, 0) for k in ("orphans", "tasks_lost", "duplicate_completions", "half_written_dirs"))
    return 0 if bad == 0 and lp.get("lock_errors_surfaced", 0) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
