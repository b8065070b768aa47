#!/usr/bin/env python3
"""Dashboard latency under concurrent load on a large board (issue 6: p95 < 150 ms).

Builds (or reuses) a board with 10,000 models and 100,000 events, a few hundred of them walked
through real stage transitions (attempts, failures with diagnoses, speedup metrics) so the funnel,
the failure search and the reports have real work to do. Then starts the real dashboard
(`python -m dashboard`, uvicorn, one process) on a loopback port and fires concurrent requests
at the overview page, a model page and /api/models, reporting p50 / p95 / max per endpoint.

    uv run bench/dashboard_bench.py [--models 10000] [--events 100000] [--concurrency 4]
                                    [--requests 200] [--board PATH] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ascendbridge.board import AttemptEnd, AttemptStart, BoardStore, NewEvent, Registration  # noqa: E402
from ascendbridge.stages import STAGES  # noqa: E402

TARGET_P95_MS = 150.0
TOKEN = "bench-token-0123456789abcdef"
WALKED = 400  # models moved through real transitions (each costs a few transactions)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def walk(store: BoardStore, model_id: str, rng: random.Random) -> None:
    """Move one model through 1-5 stages with real claims and attempts; some fail. A completed
    optimization carries its speedup (figures reach the board only with a completion)."""
    for stage in STAGES[: rng.randint(1, 5)]:
        task = store.list_tasks(stage, model_id=model_id)[0]
        claimed = store.claim_task(task.id, "bench-agent", 600)
        attempt = store.start_attempt(claimed.id, claimed.fencing_token, AttemptStart(f"run {stage}", ""))
        if rng.random() < 0.2:
            reason = rng.choice(
                [
                    "out of memory on npu:0",
                    "unsupported operator aten::_fft_r2c",
                    "tokenizer mismatch",
                    "accuracy below threshold (cosine 0.97)",
                ]
            )
            store.finish_attempt(attempt, AttemptEnd("failed", 1, rng.uniform(5, 300), {"summary": reason}))
            store.fail_task(claimed.id, claimed.fencing_token, {"summary": reason})
            return
        store.finish_attempt(attempt, AttemptEnd("passed", 0, rng.uniform(5, 300)))
        figures = [{"values": {"speedup": round(rng.lognormvariate(0.5, 0.4), 3)}}] if stage == "optimization" else []
        store.complete_task(claimed.id, claimed.fencing_token, {"bench": True}, figures=figures)


def build_board(path: Path, models: int, events: int) -> None:
    rng = random.Random(0)
    path.parent.mkdir(parents=True, exist_ok=True)
    store = BoardStore.init(path)
    try:
        ids = [f"org{i % 97}/model-{i:05d}" for i in range(models)]
        for start in range(0, models, 2000):
            store.register_models(
                [
                    Registration(
                        model_id=m,
                        description=f"synthetic model {m} for the dashboard bench",
                        priority=rng.randint(0, 9),
                    )
                    for m in ids[start : start + 2000]
                ],
                origin="bench",
            )
            log(f"  registered {min(start + 2000, models)}/{models} models")
        store.register_agent("bench-agent", "team-lead")
        for n, model_id in enumerate(rng.sample(ids, min(WALKED, models)), 1):
            walk(store, model_id, rng)
            if n % 100 == 0:
                log(f"  walked {n}/{min(WALKED, models)} models through real stage transitions")
        have = len(store.list_events(limit=events + 1))
        while have < events:
            batch = min(20_000, events - have)
            store.add_events(
                NewEvent("note", f"synthetic event {have + i}", rng.choice(ids), rng.choice(STAGES), origin="bench")
                for i in range(batch)
            )
            have += batch
            log(f"  events {have}/{events}")
    finally:
        store.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_dashboard(board: Path, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "ASCENDBRIDGE_DASHBOARD_TOKEN": TOKEN}
    flags = {"--board": board, "--port": port, "--logs": workdir / "logs", "--adaptations": workdir / "adaptations"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dashboard", *(str(arg) for arg in chain.from_iterable(flags.items()))],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(workdir / "dashboard.log", "wb"),
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"error: dashboard exited: {(workdir / 'dashboard.log').read_text()}")
        try:
            httpx.get(url + "/healthz", timeout=2)
            return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("error: dashboard did not start within 60 s")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (Linux /proc), to separate cost from queueing."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def measure(url: str, paths: list[str], requests: int, concurrency: int, server_pid: int) -> dict[str, Any]:
    """Latency of `requests` GETs cycling over `paths`, `concurrency` at a time, and the server's
    CPU time per request (on a busy machine latency is mostly waiting for a core)."""
    with httpx.Client(base_url=url, timeout=30, limits=httpx.Limits(max_connections=concurrency)) as client:
        for path in paths[:3]:  # warm caches and connection pool
            client.get(path).raise_for_status()

        def one(i: int) -> float:
            t0 = time.perf_counter()
            r = client.get(paths[i % len(paths)])
            elapsed = (time.perf_counter() - t0) * 1000
            r.raise_for_status()
            return elapsed

        cpu0 = cpu_seconds(server_pid)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            times = sorted(pool.map(one, range(requests)))
        wall = time.perf_counter() - t0
        cpu1 = cpu_seconds(server_pid)
    return {
        "server_cpu_ms_per_request": round((cpu1 - cpu0) * 1000 / requests, 1)
        if cpu0 is not None and cpu1 is not None
        else None,
        "requests": requests,
        "concurrency": concurrency,
        "p50_ms": round(statistics.median(times), 1),
        "p95_ms": round(times[max(0, int(round(0.95 * (len(times) - 1))))], 1),
        "max_ms": round(times[-1], 1),
        "req_per_s": round(requests / wall, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--requests", type=int, default=200, help="requests per endpoint")
    parser.add_argument("--board", type=Path, help="reuse this board if it exists, else build it there")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.models < 1 or args.events < args.models or args.concurrency < 1 or args.requests < 1:
        print("error: need --models >= 1, --events >= --models, --concurrency >= 1, --requests >= 1", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="dashboard-bench-"))
    (workdir / "logs").mkdir()
    (workdir / "adaptations").mkdir()
    board = args.board or workdir / "board.db"
    if board.exists():
        log(f"reusing board {board}")
    else:
        log(f"building board {board}: {args.models} models, {args.events} events")
        t0 = time.perf_counter()
        build_board(board, args.models, args.events)
        log(f"  built in {time.perf_counter() - t0:.1f} s")
    with BoardStore(board) as store:
        walked = [t.model_id for t in store.list_tasks("discovery") if t.attempts][:50]
        n_models = len(store.list_models())
        n_events = store.list_events(limit=1, newest_first=True)[0].id
    proc, url = start_dashboard(board, workdir)
    rng = random.Random(1)
    endpoints = {
        "overview /": ["/"],
        "overview filtered+search": [
            "/?stage=discovery&status=failed",
            "/?q=memory",
            "/?stage=healing&sort=model_id&page=3",
        ],
        "model page": [f"/models/{m}" for m in walked] or ["/"],
        "/api/models": [
            "/api/models",
            f"/api/models?page={rng.randint(2, 150)}",
            "/api/models?sort=model_id&order=asc",
        ],
    }
    results = {}
    try:
        for name, paths in endpoints.items():
            log(f"measuring {name} ({args.requests} requests, {args.concurrency} concurrent)")
            results[name] = measure(url, paths, args.requests, args.concurrency, proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"board: {n_models} models, {n_events} events · {args.concurrency} concurrent · "
        f"{os.cpu_count()} CPUs, load average {load:.1f} · target p95 < {TARGET_P95_MS:.0f} ms"
    )
    print(f"{'endpoint':28} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'req/s':>8} {'cpu ms/req':>11}  verdict")
    for name, r in results.items():
        verdict = "ok" if r["p95_ms"] < TARGET_P95_MS else "SLOW"
        cpu = r["server_cpu_ms_per_request"]
        cpu_text = f"{cpu:11.1f}" if cpu is not None else f"{'n/a':>11}"
        print(
            f"{name:28} {r['p50_ms']:8.1f} {r['p95_ms']:8.1f} {r['max_ms']:8.1f} {r['req_per_s']:8.1f} {cpu_text}  {verdict}"
        )
    if args.json:
        args.json.write_text(
            json.dumps({"models": n_models, "events": n_events, "load_average": load, "results": results}, indent=2)
        )
    return 0 if all(r["p95_ms"] < TARGET_P95_MS for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
