#!/usr/bin/env python3
"""The optimization stage's cost per demo model, two source trees side by side in one run.

    uv run python bench/optimization_stage_bench.py [--models tiny-bart,tiny-bert] [--before DIR]
        [--repeats 1] [--real-envs] [--out bench_optimization_stage.json]

For every demo model (demo_models/) and every tree (`--before DIR`: another checkout of this
repository, e.g. `git archive <rev> | tar -x -C DIR`; `after`: this one), a child process imports
THAT tree's stage and runs what the team lead runs: `OPTIMIZATION_STAGE.run` (search, fresh-process
confirmation, perf evidence) and then `OPTIMIZATION_STAGE.gate` (notes gate + perf gate with its
own fresh re-measurement), on a real board and a real rendered adaptation with the default
settings, the shared CPU torch test environment standing in for the synced `.venv` (the uv sync
is the only step skipped: it is the same in both trees), pinned to one core (`--cpu`, default the
last) as the team lead pins a timed stage to its slot on a CPU-only host. Trees alternate per model (before, after;
then after, before) so both see the same load. Printed per model: wall seconds of run and gate
for each tree, the chosen passes and the confirmed figure with its interval, and the gate's
verdict; then the mean per model and the load average before and after. `--real-envs`: each package
is `uv lock`ed and the stage's own sync makes its environment (each package its own `.venv` in a
tree before stable environments, the lock's stable one after), with one fresh environment root and
inductor cache for the whole bench; each row then also counts the C++ kernels its run built.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MARK = "STAGE_BENCH "


def one(name: str, tree: Path, cpu: int | None, tmp: Path, real_envs: bool = False) -> dict[str, Any]:
    """Child: run the stage and its gate from `tree` on demo model `name` (board and adaptation in
    `tmp`); figures as a dict.
    `cpu`: pinned there (inherited by every process it starts), as the team lead pins a timed stage
    to its slot's core on a CPU-only host (ascendbridge/workers/placement.py)."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    sys.path.insert(0, str(tree))
    os.environ["PYTHONPATH"] = str(tree)  # the gates' checker processes import this tree's code too
    os.environ.update(
        ASCENDBRIDGE_BOARD=str(tmp / "board.db"),
        ASCENDBRIDGE_LOGS=str(tmp / "logs"),
        ASCENDBRIDGE_ADAPTATIONS=str(tmp / "adaptations"),
    )
    (tmp / "adaptations").mkdir()
    from ascendbridge.board import BoardStore
    from ascendbridge.package import uv_env
    from ascendbridge.package.generator import generate, render_adaptation
    from ascendbridge.stage_api import StageContext
    from bench.support.local_model import register_local
    from bench.support.torch_env import torch_env_python
    from optimization.stage import OPTIMIZATION_STAGE

    info = json.loads((tree / "demo_models" / "manifest.json").read_text())["models"][name]
    config = json.loads((tree / "demo_models" / name / "config.json").read_text())
    board = BoardStore.init(tmp / "board.db")
    record, task, directory, spec = register_local(
        board,
        info["model_id"],
        tree / "demo_models" / name,
        "optimization",
        info["task_family"],
        info["architecture"],
        config["model_type"],
    )
    if real_envs:  # the stage's own `uv sync`: a package .venv in the tree before, the lock's stable env after
        assert generate(spec, directory).ok, f"uv lock of {name} failed"
    else:
        render_adaptation(spec, directory)
        (directory / ".venv").symlink_to(torch_env_python().absolute().parent.parent, target_is_directory=True)
        # the shared env stands in for the synced one
        uv_env.sync = lambda *a, **k: SimpleNamespace(ok=True)  # type: ignore[assignment]  # a stand-in, not a sync
    log = io.StringIO()
    ctx = StageContext(
        model=record,
        task=task,
        adaptation_dir=directory,
        board_path=tmp / "board.db",
        log=log,
        settings={"device": "cpu"},
    )
    built_before = kernel_builds()
    start = time.perf_counter()
    outcome = OPTIMIZATION_STAGE.run(ctx)
    run_s = time.perf_counter() - start
    gate = OPTIMIZATION_STAGE.gate(ctx) if outcome.status == "done" else None
    gate_s = time.perf_counter() - start - run_s
    notes_path = directory / "optimization_notes.json"
    notes = json.loads(notes_path.read_text()) if notes_path.is_file() else {}
    final = notes.get("final", {})
    board.close()
    return {
        "model": name,
        "run_s": run_s,
        "gate_s": gate_s,
        "status": outcome.status,
        "summary": outcome.summary,
        "chosen": final.get("passes"),
        "speedup": final.get("speedup"),
        "interval": final.get("interval"),
        "gate": None
        if gate is None
        else ("passed" if gate.passed else "inconclusive" if getattr(gate, "inconclusive", False) else "failed"),
        "gate_summary": None if gate is None else gate.summary,
        "log": log.getvalue(),
        "kernel_builds": kernel_builds() - built_before,
        "timed_pairs": timed_pairs(directory, notes, gate.report if gate is not None else {}),
    }


def kernel_builds() -> int:
    """C++ kernels in inductor's cache (`*.so`): the environment's TORCHINDUCTOR_CACHE_DIR, which the
    bench sets for both trees, so a run adds what it built."""
    cache = Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR", "/nonexistent"))
    return sum(1 for _ in cache.rglob("*.so")) if cache.is_dir() else 0


def timed_pairs(directory: Path, notes: dict[str, Any], gate_report: dict[str, Any]) -> dict[str, int]:
    """Block pairs timed by each step (load does not change these counts): the search's rows, the
    confirmation, a separate perf run (0 when the confirmation wrote the perf evidence), the gate."""
    rows = [r for r in notes.get("passes", []) + notes.get("combination", []) if r.get("measured")]
    perf = notes.get("perf_run") or {}
    metrics = directory / str(perf.get("metrics", ""))
    separate = perf.get("process") != "confirmation" and metrics.is_file()
    reproduced = [((r.get("details") or {}).get("reproduced") or {}) for r in gate_report.get("reports", [])]
    return {
        "search": sum(r["paired"]["pairs"] for r in rows),
        "search_rows": len(rows),
        "confirmation": int(((notes.get("confirmation") or {}).get("paired") or {}).get("pairs") or 0),
        "perf_run": int(json.loads(metrics.read_text())["optimization"]["paired"]["pairs"]) if separate else 0,
        "gate": sum(int(r.get("pairs") or 0) for r in reproduced),
    }


def child(name: str, tree: Path, cpu: int | None, timeout: float, real_envs: bool = False) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--one", name, "--tree", str(tree)]
    argv += ["--real-envs"] if real_envs else []
    proc = subprocess.run(
        argv + ([] if cpu is None else ["--cpu", str(cpu)]), cwd=tree, capture_output=True, text=True, timeout=timeout
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    if not lines:
        return {"model": name, "error": (proc.stderr or proc.stdout).strip()[-800:]}
    return json.loads(lines[-1][len(MARK) :])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    manifest = json.loads((REPO / "demo_models" / "manifest.json").read_text())["models"]
    parser.add_argument("--models", default=",".join(manifest))
    parser.add_argument("--before", type=Path, default=None, help="another checkout to time beside this one")
    parser.add_argument("--no-after", action="store_true", help="time only the --before tree")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--cpu",
        type=int,
        default=max(os.sched_getaffinity(0)),
        help="core each run is pinned to, as a timed slot (default: the last one; -1: not pinned)",
    )
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--out", default="bench_optimization_stage.json")
    parser.add_argument(
        "--real-envs",
        action="store_true",
        help="lock each package and let the stage sync it (stable environments and kernel caches in a "
        "fresh directory for the whole bench), instead of the shared test environment",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--tree", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        with tempfile.TemporaryDirectory(prefix="stage-bench-") as tmp:
            row = one(args.one, args.tree.resolve(), None if args.cpu < 0 else args.cpu, Path(tmp), args.real_envs)
        print(MARK + json.dumps(row, default=str), flush=True)
        return 0
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in manifest]
    if unknown or args.repeats < 1 or (args.no_after and not args.before):
        print(
            f"error: unknown model(s) {', '.join(unknown)}"
            if unknown
            else "error: --repeats >= 1, and --no-after needs --before",
            file=sys.stderr,
        )
        return 2
    trees = {**({"before": args.before.resolve()} if args.before else {}), **({} if args.no_after else {"after": REPO})}
    caches = None
    if args.real_envs:  # one fresh environment root and kernel cache for every run of both trees
        caches = Path(tempfile.mkdtemp(prefix="stage-bench-caches-"))
        os.environ.update(
            ASCENDBRIDGE_STABLE_ENVS=str(caches / "envs"),
            TORCHINDUCTOR_CACHE_DIR=str(caches / "inductor"),
            TRITON_CACHE_DIR=str(caches / "triton"),
        )
    load_before = os.getloadavg()
    print(
        f"optimization stage bench: {len(names)} models x {args.repeats}, trees {', '.join(trees)}, pinned to "
        f"{'no core' if args.cpu < 0 else f'core {args.cpu}'}; load average {load_before[0]:.1f} on "
        f"{os.cpu_count()} CPUs",
        flush=True,
    )
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {n: {t: [] for t in trees} for n in names}
    for i, name in enumerate(names):
        for r in range(args.repeats):
            order = list(trees) if (i + r) % 2 else list(reversed(trees))
            for t in order:
                row = child(name, trees[t], None if args.cpu < 0 else args.cpu, args.timeout, args.real_envs)
                rows[name][t].append(row)
                if "error" in row:
                    print(f"  {name} [{t}]: ERROR {row['error'][-300:]}", flush=True)
                else:
                    interval = row["interval"] or [1.0, 1.0]
                    print(
                        f"  {name} [{t}]: run {row['run_s']:.0f} s + gate {row['gate_s']:.0f} s; "
                        f"{'+'.join(row['chosen'] or []) or 'no gain'} x{row['speedup'] or 1:.2f} "
                        f"[{interval[0]:.2f},{interval[1]:.2f}]; gate {row['gate']}; "
                        f"{row['kernel_builds']} C++ kernel builds",
                        flush=True,
                    )
    print(f"\n{'model':22s} " + " ".join(f"{t + ' s (min..max)':>26s}" for t in trees))
    totals: dict[str, list[float]] = {t: [] for t in trees}
    for name in names:
        cells = []
        for t in trees:
            ok = [x["run_s"] + x["gate_s"] for x in rows[name][t] if "error" not in x]
            if ok:
                totals[t].append(statistics.mean(ok))
                cells.append(f"{statistics.mean(ok):>8.0f} ({min(ok):.0f}..{max(ok):.0f})")
            else:
                cells.append("error")
        print(f"{name:22s} " + " ".join(f"{c:>26s}" for c in cells))
    print("mean per model: " + ", ".join(f"{t} {statistics.mean(v):.0f} s" for t, v in totals.items() if v))
    load_after = os.getloadavg()
    print(f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f}")
    Path(args.out).write_text(
        json.dumps({"models": rows, "load_average": [load_before, load_after]}, indent=2, default=str) + "\n"
    )
    if caches is not None:
        shutil.rmtree(caches, ignore_errors=True)
    return 0 if all("error" not in x for n in rows.values() for t in n.values() for x in t) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
