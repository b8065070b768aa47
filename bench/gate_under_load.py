#!/usr/bin/env python3
"""The benchmark gate's verdicts idle and beside busy loops: honest evidence and a forged 10x latency.

    uv run --locked --extra ray python bench/gate_under_load.py [--model tiny-bert] [-n 5] [--cores 1]
        [--threads 1] [--json FILE]

Renders one real package (bench/support/tiny_adaptations.py, run with the shared CPU torch test
environment), runs its accuracy_run.py once on an idle host as the benchmark stage does (pinned to
`--cores` with `--threads`: the team lead's timed core on a 2-core host, one thread; stage warmup
3, iters 10), copies it with every forward timing figure forged 10x faster (consistently: stats,
throughput, calibration ratio), then runs the stand-alone gate (benchmark/scripts/check_accuracy_run.py, which applies the recorded
placement) N times on each package idle and N times beside bench/busy_loops.py (2 CPU loops, 2
memory-copy loops). Prints a table of verdict counts and, for the forward call, the gate's
fastest uninterrupted call and model/probe ratio relative to the reported ones (x: 1 = as
reported) and its rounds' spread. Not a
test: it prints measurements (the load average with them: "idle" is whatever else the host runs).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.busy_loops import busy_loops  # noqa: E402
from bench.support import tiny_adaptations as tiny  # noqa: E402
from bench.support.torch_env import torch_env_python  # noqa: E402

CHECKER = REPO / "benchmark" / "scripts" / "check_accuracy_run.py"
FORGED = 10.0


def gate(directory: Path, python: Path) -> dict[str, Any]:
    """One stand-alone gate run: its exit code, verdict, seconds and the forward call's figures."""
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(CHECKER), "--adaptation-dir", str(directory), "--json", "--python", str(python)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    seconds = time.monotonic() - start
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"exit": proc.returncode, "verdict": f"no report: {proc.stderr.strip()[-200:]}", "seconds": seconds}
    forward = [t for ts in report.get("timings", {}).values() for t in ts if t.get("what") == "forward call"]
    verdict = "passed" if report["passed"] else "inconclusive" if report.get("inconclusive") else "failed"
    return {
        "exit": proc.returncode,
        "verdict": verdict,
        "seconds": seconds,
        "summary": report["summary"],
        "placement": report.get("placement"),
        "forward": forward[0] if forward else {},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny-bert", choices=sorted(tiny.TINY_MODELS))
    parser.add_argument("-n", type=int, default=5, help="gate runs per package and condition")
    parser.add_argument("--cores", default="1", help="cores the benchmark run is pinned to (default 1)")
    parser.add_argument("--threads", type=int, default=1, help="its torch threads (default 1)")
    parser.add_argument("--json", type=Path, help="also write every gate run here")
    args = parser.parse_args(argv)
    python = torch_env_python()
    root = Path(tempfile.mkdtemp(prefix="gate-under-load-"))
    try:
        honest = tiny.make_adaptation(root, args.model)
        code, result, _, err = tiny.record_as_the_stage(
            python, honest, [int(c) for c in args.cores.split(",")], args.threads
        )
        if code not in (0, 2):
            print(f"error: accuracy_run.py failed (exit {code}): {err.strip()[-300:]}", file=sys.stderr)
            return 1
        forged = root / "forged"
        shutil.copytree(honest, forged)
        tiny.forge_latency(forged / result["metrics"], FORGED)
        print(
            f"{args.model}: run on cores {args.cores}, {args.threads} thread(s), median {result['median_ms']:.3f} ms; "
            f"load average {os.getloadavg()[0]:.2f}",
            flush=True,
        )
        rows: list[dict[str, Any]] = []
        for condition in ("idle", "busy_loops(2,2)"):
            with busy_loops(2, 2) if condition != "idle" else contextlib.nullcontext():
                for label, directory in (("honest", honest), (f"forged x{FORGED:g}", forged)):
                    for _ in range(args.n):
                        run = {
                            "condition": condition,
                            "evidence": label,
                            "load": os.getloadavg()[0],
                            **gate(directory, python),
                        }
                        rows.append(run)
                        print(
                            f"  {condition:15s} {label:10s} {run['verdict']:12s} {run['seconds']:5.1f} s "
                            f"{_figures(run)}",
                            flush=True,
                        )
        print(f"placement: {rows[0].get('placement')}")
        print(table(rows))
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2))
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _figures(run: dict[str, Any]) -> str:
    f = run.get("forward") or {}
    if "relative" not in f:
        return ""
    quiet = "-" if f.get("quiet_x") is None else f"x{f['quiet_x']:.2f}"
    return (
        f"fastest call x{f['absolute']:.2f}, uninterrupted {quiet}, ratio x{f['relative']:.2f} "
        f"spread x{f['spread']:.2f}, rounds {f['rounds']}, preemptions {f['preemptions']}"
    )


def table(rows: list[dict[str, Any]]) -> str:
    """Verdict counts, the forward call's uninterrupted-call and ratio ranges (x: re-timed over
    reported) and spread range, per condition and evidence."""
    lines = [
        f"{'condition':16s} {'evidence':10s} {'passed':>6s} {'inconcl.':>8s} {'failed':>6s} "
        f"{'uninterrupted x':>16s} {'ratio x (min..max)':>20s} {'spread (max)':>12s} {'load avg':>8s} "
        f"{'s/run':>6s}"
    ]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["condition"], r["evidence"]), []).append(r)
    for (condition, evidence), runs in groups.items():
        count = {v: sum(1 for r in runs if r["verdict"] == v) for v in ("passed", "inconclusive", "failed")}
        rel = [r["forward"]["relative"] for r in runs if "relative" in r.get("forward", {})]
        spread = [r["forward"]["spread"] for r in runs if "spread" in r.get("forward", {})]
        quiet = [r["forward"]["quiet_x"] for r in runs if r.get("forward", {}).get("quiet_x") is not None]
        lines.append(
            f"{condition:16s} {evidence:10s} {count['passed']:6d} {count['inconclusive']:8d} "
            f"{count['failed']:6d} {_range(quiet):>16s} {_range(rel):>20s} {(f'x{max(spread):.2f}' if spread else '-'):>12s} "
            f"{sum(r['load'] for r in runs) / len(runs):8.2f} "
            f"{sum(r['seconds'] for r in runs) / len(runs):6.1f}"
        )
    return "\n".join(lines)


def _range(values: list[float]) -> str:
    return f"x{min(values):.2f}..x{max(values):.2f}" if values else "-"


if __name__ == "__main__":
    sys.exit(main())
