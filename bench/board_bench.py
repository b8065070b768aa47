#!/usr/bin/env python3
"""Board performance: bulk registration, and claim + complete throughput under contention.

    uv run bench/board_bench.py [--models 10000] [--workers 8] [--claims 2000] [--json]

Phase 1 registers --models models in one call (what `board_ops.py register_many` does).
Phase 2 starts --workers processes that claim and complete discovery tasks from that board at
the same time until --claims tasks are done; it counts every error ("database is locked" in
particular) and checks that no task was claimed twice. Targets (issue 2, 2 cores): registration
under 10 s, zero lock errors.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from ascendbridge.board import BoardStore, Registration  # noqa: E402

REGISTRATION_TARGET_S = 10.0


def bench_registration(board: Path, models: int) -> dict[str, Any]:
    regs = [Registration(model_id=f"bench-org/model-{i:05d}", priority=i % 7) for i in range(models)]
    start = time.perf_counter()
    with BoardStore.init(board) as store:
        results = store.register_models(regs, origin="bench")
    elapsed = time.perf_counter() - start
    assert sum(created for _, created in results) == models
    return {
        "models": models,
        "seconds": round(elapsed, 3),
        "models_per_s": round(models / elapsed, 1),
        "target_s": REGISTRATION_TARGET_S,
        "ok": elapsed < REGISTRATION_TARGET_S,
    }


def _worker(board: str, owner: str, quota: int, go: Any, results: Any) -> None:
    """Claim and complete up to `quota` discovery tasks; report ids, errors and timings."""
    store = BoardStore(board)
    claimed: list[int] = []
    errors: list[str] = []
    go.wait()
    start = time.perf_counter()
    while len(claimed) < quota:
        try:
            task = store.claim_next(owner=owner, lease_s=300, stages=["discovery"])
            if task is None:
                break
            claimed.append(task.id)
            store.complete_task(task.id, task.fencing_token, {"bench": True}, origin=owner)
        except Exception as exc:  # counted and reported, never hidden
            errors.append(f"{type(exc).__name__}: {exc}")
            if len(errors) >= 50:
                break
    store.close()
    results.put({"owner": owner, "claimed": claimed, "errors": errors, "seconds": time.perf_counter() - start})


def bench_claims(board: Path, workers: int, claims: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")  # engines are not fork-safe; each worker opens its own
    go = ctx.Event()
    results = ctx.Queue()
    quota = -(-claims // workers)
    procs = [
        ctx.Process(target=_worker, args=(str(board), f"bench-worker-{n}", quota, go, results)) for n in range(workers)
    ]
    for proc in procs:
        proc.start()
    time.sleep(2.0)  # let every worker import and open the board, so they start together
    start = time.perf_counter()
    go.set()
    reports = [results.get(timeout=600) for _ in procs]
    elapsed = time.perf_counter() - start
    for proc in procs:
        proc.join(timeout=60)
    ids = [i for r in reports for i in r["claimed"]]
    errors = [e for r in reports for e in r["errors"]]
    locked = sum("database is locked" in e for e in errors)
    return {
        "workers": workers,
        "claims": len(ids),
        "seconds": round(elapsed, 3),
        "claims_per_s": round(len(ids) / elapsed, 1) if elapsed else None,
        "duplicate_claims": len(ids) - len(set(ids)),
        "errors": len(errors),
        "database_locked_errors": locked,
        "first_errors": errors[:3],
        "per_worker": sorted(len(r["claimed"]) for r in reports),
        "ok": not errors and len(ids) == len(set(ids)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--claims", type=int, default=2_000, help="claim+complete cycles in total")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.models <= 0 or args.workers <= 0 or args.claims <= 0:
        parser.error("--models, --workers and --claims must be positive")
    with tempfile.TemporaryDirectory(prefix="board-bench-") as tmp:
        board = Path(tmp) / "board.db"
        print(f"registering {args.models} models ...", file=sys.stderr, flush=True)
        registration = bench_registration(board, args.models)
        print(f"{args.workers} workers claiming {args.claims} tasks ...", file=sys.stderr, flush=True)
        claims = bench_claims(board, args.workers, min(args.claims, args.models))
    report = {"registration": registration, "claims": claims}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        r, c = registration, claims
        print(
            f"registration: {r['models']} models in {r['seconds']:.2f} s ({r['models_per_s']:.0f}/s), "
            f"target < {r['target_s']:.0f} s: {'ok' if r['ok'] else 'MISSED'}"
        )
        print(
            f"claim+complete: {c['claims']} tasks by {c['workers']} processes in {c['seconds']:.2f} s "
            f"({c['claims_per_s']}/s); per worker {c['per_worker']}"
        )
        print(
            f"errors: {c['errors']} (database is locked: {c['database_locked_errors']}), "
            f"duplicate claims: {c['duplicate_claims']}: {'ok' if c['ok'] else 'FAILED'}"
        )
        for line in c["first_errors"]:
            print(f"  {line}")
    return 0 if registration["ok"] and claims["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
