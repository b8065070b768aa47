"""Wall time per model for Adaptation + Healing (each with its gate) over the demo set, and the time
to create a second adaptation environment from the uv cache.

    uv run bench/adaptation_bench.py [--models tiny-gpt2,tiny-bert] [--keep DIR] [--json]

Runs on a throwaway board and adaptations directory (or --keep DIR), through the real stages:
discovery's metadata, ADAPTATION_STAGE.run + gate, HEALING_STAGE.run + gate. The first model
warms the uv cache if it is cold; the median is the number to compare (target <= 30 s per tiny
model on 2 cores). Not a test: it prints measurements.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from ascendbridge.board import BoardStore
from ascendbridge.board.records import Registration
from ascendbridge.config import REPO_ROOT
from ascendbridge.discovery.discover import discover
from ascendbridge.package import uv_env
from ascendbridge.stage_api import StageContext
from discovery.stage import model_fields

DEMO = REPO_ROOT / "demo_models"


def stages() -> dict[str, Any]:
    return {
        ep.name: ep.load() for ep in entry_points(group="ascendbridge.stages") if ep.name in ("adaptation", "healing")
    }


def child_cpu_s() -> float:
    """CPU seconds of finished child processes: the load-independent cost of a model's run."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(label: str, timings: dict[str, float], fn: Any, *args: Any) -> Any:
    start = time.monotonic()
    try:
        return fn(*args)
    finally:
        timings[label] = round(time.monotonic() - start, 2)


def bench_model(board: BoardStore, folder: str, adaptations: Path, found: dict[str, Any]) -> dict[str, Any]:
    model_id = f"demo/{folder}"
    timings: dict[str, float] = {}
    start = time.monotonic()
    cpu_start = child_cpu_s()
    info = timed("discover", timings, discover, model_id, "local", str(DEMO / folder))
    board.register_models([Registration(model_id=model_id, source="local", path=str(DEMO / folder))])
    model = board.update_model_metadata(model_id, model_fields(info), info.model_dump(mode="json"))  # as discovery does
    row: dict[str, Any] = {"model": folder, "family": info.task_family}
    for name in ("adaptation", "healing"):
        if name not in found:
            row[name] = "not installed"
            continue
        task = board.list_tasks(stage=name, model_id=model_id)[0]
        ctx = StageContext(
            model=model,
            task=task,
            adaptation_dir=adaptations / model.adaptation_name,
            board_path=board.path,
            log=io.StringIO(),
        )
        outcome = timed(f"{name}_run", timings, found[name].run, ctx)
        verdict = timed(f"{name}_gate", timings, found[name].gate, ctx) if outcome.status == "done" else None
        row[name] = (
            "passed"
            if verdict and verdict.passed
            else f"{outcome.status}: {outcome.summary}"
            if not verdict
            else f"gate failed: {verdict.summary}"
        )
        if not (verdict and verdict.passed):
            break
    row["timings_s"] = timings
    row["total_s"] = round(time.monotonic() - start, 2)
    row["cpu_s"] = round(child_cpu_s() - cpu_start, 2)
    return row


def second_environment(adaptation: Path, scratch: Path) -> float:
    """Copy a synced adaptation without its .venv and time `uv sync --extra cpu` of the copy."""
    copy = scratch / "second-env" / adaptation.name
    shutil.copytree(adaptation, copy, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    result = uv_env.sync(copy, "cpu")
    if not result.ok:
        raise RuntimeError(f"uv sync of the second environment failed: {result.tail(5)}")
    return round(result.duration_s, 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated demo_models folders (default: all)")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON")
    args = parser.parse_args(argv)
    manifest = json.loads((DEMO / "manifest.json").read_text())["models"]
    folders = args.models.split(",") if args.models else sorted(manifest)
    unknown = [f for f in folders if f not in manifest]
    if unknown:
        print(f"error: unknown demo model(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    work = args.keep.resolve() if args.keep else Path(tempfile.mkdtemp(prefix="adaptation-bench-"))
    adaptations = work / "adaptations"
    adaptations.mkdir(parents=True, exist_ok=True)
    os.environ["ASCENDBRIDGE_ADAPTATIONS"] = str(adaptations)
    found = stages()
    rows = []
    try:
        with BoardStore.init(work / "board.db") as board:
            for folder in folders:
                print(f"bench: {folder} ...", file=sys.stderr, flush=True)
                rows.append(bench_model(board, folder, adaptations, found))
                print(f"bench: {folder}: {rows[-1]['total_s']} s {rows[-1]}", file=sys.stderr, flush=True)
        synced = [adaptations / f"demo__{r['model']}" for r in rows if r.get("healing") == "passed"]
        second = second_environment(synced[0], work) if synced else None
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    totals = [r["total_s"] for r in rows]
    summary = {
        "models": rows,
        "median_s": statistics.median(totals),
        "max_s": max(totals),
        "median_cpu_s": statistics.median(r["cpu_s"] for r in rows),
        "second_env_sync_s": second,
        "cpus": os.cpu_count(),
        "load_avg_1m": os.getloadavg()[0],
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(
            f"{'model':<22} {'family':<24} {'adapt':>6} {'a-gate':>6} {'heal':>6} {'h-gate':>6} {'total':>6} {'cpu':>6}  result"
        )
        for r in rows:
            t = r["timings_s"]
            print(
                f"{r['model']:<22} {r['family'] or '-':<24} {t.get('adaptation_run', 0):>6} "
                f"{t.get('adaptation_gate', 0):>6} {t.get('healing_run', 0):>6} {t.get('healing_gate', 0):>6} "
                f"{r['total_s']:>6} {r['cpu_s']:>6}  {r.get('healing', r.get('adaptation'))}"
            )
        print(
            f"median {summary['median_s']} s wall, {summary['median_cpu_s']} s CPU per model "
            f"(max {summary['max_s']} s) on {summary['cpus']} CPUs, load average {summary['load_avg_1m']:.1f}; "
            f"second environment from the uv cache: {second} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
