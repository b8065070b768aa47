"""One architecture at several sizes through the real stages: Qwen3-0.6B's published config
(sized_models/qwen3-0.6b, random weights) as reduced-depth proxies of 1, 4, 14 and all 28 layers
(171 M to 596 M parameters). Per size, one main-job pass on a board of its own (one worker, the
stages named); per stage: its status, attempts, wall time (first start to last finish), slot time
(its attempts' durations summed), the largest process's peak resident memory, and for the timed
stages the iterations their measurement chose (warm-up + timed calls, from the metrics files).
Not a test: each size builds the model in every stage and syncs (or reuses) its package environment.

    uv run python bench/size_scaling.py [--depths 1 4] [--stages discovery,adaptation,healing,benchmark]
        [--timeout 3600] [--json out.json] [--plot out.png] [--keep DIR]

Prints a Markdown table per run (docs/measurements/size_scaling.md keeps the dated ones).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from ab_runtime.metrics_file import find_metrics
from ab_runtime.spec import proxy_label
from ascendbridge.board import BoardStore
from ascendbridge.cli_errors import OneLineParser
from ascendbridge.config import REPO_ROOT
from ascendbridge.discovery.config_estimate import proxy_parameters
from ascendbridge.gatekit.summary import pyplot, save_figure

SIZED = REPO_ROOT / "sized_models" / "qwen3-0.6b"
LAYERS = 28
PARAMETERS = json.loads((SIZED.parent / "manifest.json").read_text())["models"]["qwen3-0.6b"]["parameters"]
DEFAULT_STAGES = "discovery,adaptation,healing,benchmark"
HEADER = (
    "| size | parameters | stage | status | attempts | wall s | slot s | peak RSS GiB | iterations (warm-up + timed) |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def run_size(depth: int, stages: str, timeout_s: float, root: Path) -> dict[str, Any]:
    """One main-job pass of the model at `depth` layers (the full model at 28) on a fresh board under `root`."""
    listing = root / "models.jsonl"
    entry = {"model_id": f"sized/qwen3-0.6b-d{depth}", "source": "local", "path": str(SIZED)}
    listing.write_text(json.dumps({**entry, **({"proxy_depth": depth} if depth < LAYERS else {})}) + "\n")
    env = {**os.environ, "ASCENDBRIDGE_LOGS": str(root / "logs"), "ASCENDBRIDGE_ADAPTATIONS": str(root / "adaptations")}
    argv = [sys.executable, "-m", "ascendbridge.main_job", "--models", str(listing), "--board", str(root / "board.db")]
    argv += ["--stages", stages, "--workers", "1", "--no-serving"]
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
        code: int | str = proc.returncode
    except subprocess.TimeoutExpired:
        code = "timed out"
    wall = time.monotonic() - started
    with BoardStore(root / "board.db", read_only=True) as store:
        (model,) = store.list_models()
        tasks = {t.stage: t for t in store.list_tasks(model_id=model.model_id)}
        attempts = store.list_attempts(model.model_id)
        adaptation = root / "adaptations" / model.adaptation_name
    rows = []
    for stage in stages.split(","):
        mine = [a for s, a in attempts if s == stage]
        task = tasks.get(stage)
        starts = [datetime.fromisoformat(a.started_at) for a in mine]
        ends = [datetime.fromisoformat(a.finished_at) for a in mine if a.finished_at]
        peaks = [a.peak_rss_bytes for a in mine if a.peak_rss_bytes]
        rows.append(
            {
                "stage": stage,
                "status": task.status if task else "absent",
                "attempts": len(mine),
                "wall_s": (max(ends) - min(starts)).total_seconds() if starts and ends else None,
                "slot_s": sum(a.duration_s or 0.0 for a in mine),
                "peak_rss_bytes": max(peaks) if peaks else None,
                "iterations": _iterations(adaptation, stage),
            }
        )
    return {
        "depth": depth,
        "label": proxy_label(depth, LAYERS) if depth < LAYERS else f"full ({LAYERS} layers)",
        "parameters": proxy_parameters(PARAMETERS, json.loads((SIZED / "config.json").read_text()), depth),
        "main_job_exit": code,
        "main_job_wall_s": wall,
        "stages": rows,
    }


def _iterations(adaptation: Path, stage: str) -> list[str]:
    """`dtype: warm-up + timed` per measured run the stage left (the benchmark's metrics files), with
    `of N asked (budget)` where the budget, not the evidence, ended the timing (ab_runtime/sizing.py)."""
    if stage != "benchmark" or not adaptation.is_dir():
        return []
    out = []
    for metrics in find_metrics(adaptation):
        timing = metrics.data.get("timing") or {}
        sized = timing.get("sizing") or {}
        cut = f" of {sized['asked_iterations']} asked (budget)" if sized.get("budget_ended") else ""
        out.append(f"{metrics.run.dtype}: {timing.get('warmup')} + {timing.get('iterations')}{cut}")
    return out


def table(results: list[dict[str, Any]]) -> str:
    lines = [HEADER]
    for r in results:
        for s in r["stages"]:
            wall = f"{s['wall_s']:.0f}" if s["wall_s"] is not None else "-"
            peak = f"{s['peak_rss_bytes'] / 1024**3:.2f}" if s["peak_rss_bytes"] else "-"
            lines.append(
                f"| {r['label']} | {r['parameters'] / 1e6:.0f} M | {s['stage']} | {s['status']} | {s['attempts']} | "
                f"{wall} | {s['slot_s']:.0f} | {peak} | {'; '.join(s['iterations']) or '-'} |"
            )
    return "\n".join(lines)


def plot(results: list[dict[str, Any]], path: Path) -> Path:
    """Wall time and peak resident memory against parameters, log-log, one line per stage."""
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    fig, (time_ax, memory_ax) = pyplot().subplots(1, 2, figsize=(10, 3.8))
    stages = dict.fromkeys(s["stage"] for r in results for s in r["stages"])
    for stage in stages:
        points = [(r["parameters"], s) for r in results for s in r["stages"] if s["stage"] == stage]
        timed = [(n, s["wall_s"]) for n, s in points if s["wall_s"]]
        held = [(n, s["peak_rss_bytes"] / 1024**3) for n, s in points if s["peak_rss_bytes"]]
        if timed:
            time_ax.plot(*zip(*timed, strict=True), marker="o", label=stage)
        if held:
            memory_ax.plot(*zip(*held, strict=True), marker="o", label=stage)
    sizes = sorted({r["parameters"] for r in results})
    for ax, what in ((time_ax, "wall time (s)"), (memory_ax, "peak resident memory (GiB)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(sizes, [f"{n / 1e6:.0f} M" for n in sizes])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("parameters (proxies of Qwen3-0.6B)")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
    time_ax.legend(fontsize=8)
    return save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(prog="size_scaling.py", description=__doc__.splitlines()[0])
    p.add_argument("--depths", type=int, nargs="+", default=[1, 4, 14, LAYERS], help="layers of each size (28: full)")
    p.add_argument("--stages", default=DEFAULT_STAGES, help=f"the stages of each pass (default {DEFAULT_STAGES})")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds one size's pass may take (default 3600)")
    p.add_argument("--json", type=Path, help="also write the results here")
    p.add_argument("--plot", type=Path, help="also draw time and memory against parameters (log-log PNG) here")
    p.add_argument("--keep", type=Path, help="keep each size's board, logs and packages under this folder")
    args = p.parse_args(argv)
    if bad := [d for d in args.depths if not 1 <= d <= LAYERS]:
        p.error(f"--depths {bad[0]} is not within Qwen3-0.6B's {LAYERS} layers (1 to {LAYERS})")
    results = []
    for depth in sorted(args.depths):
        with tempfile.TemporaryDirectory(prefix=f"size-scaling-d{depth}-") as tmp:
            root = Path(tmp) if args.keep is None else args.keep.resolve() / f"d{depth}"
            root.mkdir(parents=True, exist_ok=True)
            print(f"depth {depth}: one main-job pass over {args.stages} in {root} ...", flush=True)
            results.append(run_size(depth, args.stages, args.timeout, root))
            print(table(results[-1:]), flush=True)
    print(f"\n{table(results)}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    if args.plot:
        print(f"plot: {plot(results, args.plot)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
