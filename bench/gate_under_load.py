#!/usr/bin/env python3
"""The benchmark gate's verdicts idle and beside busy loops: honest evidence and a forged 10x latency.

    uv run --locked --extra ray python bench/gate_under_load.py [--model tiny-bert] [-n 5] [--cores 1]
        [--threads 1] [--cpu-loops 2] [--memory-loops 2] [--memory-mib 128] [--model-loop] [--no-idle]
        [--json FILE]

Renders one real package (bench/support/tiny_adaptations.py, run with the shared CPU torch test
environment), runs its accuracy_run.py once on an idle host as the benchmark stage does (pinned to
`--cores` with `--threads`: the team lead's timed core on a 2-core host, one thread; stage warmup
3, iters 10), copies it with every forward timing figure forged 10x faster (consistently: stats,
throughput, calibration ratio), then runs the stand-alone gate (benchmark/scripts/check_accuracy_run.py, which applies the recorded
placement) N times on each package idle (unless --no-idle) and N times beside bench/busy_loops.py
(2 CPU loops and 2 memory-copy loops of 128 MiB by default; issue 55's build host: --cpu-loops 4
--memory-mib 300 --model-loop, the model loop a memory-bound 0.2 B-parameter forward in the torch
environment). Prints a table of verdict counts and, for the forward call, the gate's fastest
uninterrupted call and model/probe ratio relative to the reported ones (x: 1 = as reported), the
probe's slowdown (the load's measure, calibration.load_x), the figure's slowdown over it
(`unexplained`: beyond x4 fails), the other processes' CPUs and the rounds' spread. Not a test: it
prints measurements (the load average with them: "idle" is whatever else the host runs).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import signal
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
    parser.add_argument("--cpu-loops", type=int, default=2, help="CPU loops beside the gate (default 2)")
    parser.add_argument("--memory-loops", type=int, default=2, help="memory-copy loops beside it (default 2)")
    parser.add_argument("--memory-mib", type=int, default=128, help="each memory loop's footprint (default 128)")
    parser.add_argument("--model-loop", action="store_true", help="also a memory-bound model's forward loop")
    parser.add_argument("--no-idle", action="store_true", help="only the loaded condition")
    parser.add_argument("--budget-s", type=float, help="start no gate run after this many seconds")
    parser.add_argument("--json", type=Path, help="also write every gate run here")
    args = parser.parse_args(argv)
    # A SIGTERM (a `kill`, a timeout) unwinds through busy_loops' context, which stops the loops.
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    start = time.monotonic()
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
        loaded = f"busy_loops({args.cpu_loops},{args.memory_loops}x{args.memory_mib}MiB{',model' if args.model_loop else ''})"
        load = (args.cpu_loops, args.memory_loops, args.memory_mib, python if args.model_loop else None)
        for condition in ([] if args.no_idle else ["idle"]) + [loaded]:
            with busy_loops(*load) if condition != "idle" else contextlib.nullcontext():
                for _, (label, directory) in itertools.product(
                    range(args.n), (("honest", honest), (f"forged x{FORGED:g}", forged))
                ):  # alternating, so a run cut short by --budget-s still has both
                    if args.budget_s is not None and time.monotonic() - start > args.budget_s:
                        print(f"  budget of {args.budget_s:g} s spent: no more gate runs", flush=True)
                        break
                    run = {
                        "condition": condition,
                        "evidence": label,
                        "load": os.getloadavg()[0],
                        **gate(directory, python),
                    }
                    rows.append(run)
                    print(
                        f"  {condition:30s} {label:10s} {run['verdict']:12s} {run['seconds']:5.1f} s {_figures(run)}",
                        flush=True,
                    )
        print(f"placement: {rows[0].get('placement') if rows else None}")
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
    others = ",".join("-" if o is None else f"{o:.2f}" for o in f.get("others_cpus", []))
    return (
        f"fastest call x{f['absolute']:.2f}, uninterrupted {quiet}, ratio x{f['relative']:.2f}, "
        f"probe slowed {_range(f.get('load_x', []))}, unexplained x{f['unexplained']:.2f}, "
        f"spread x{f['spread']:.2f}, rounds {f['rounds']}, series {f.get('series', 1)}, "
        f"preemptions {f['preemptions']}, other CPUs {others}"
    )


def table(rows: list[dict[str, Any]]) -> str:
    """Verdict counts, the forward call's uninterrupted-call, ratio, probe-slowdown and unexplained
    ranges (x: re-timed over reported) and spread range, per condition and evidence."""
    lines = [
        f"{'condition':30s} {'evidence':10s} {'passed':>6s} {'inconcl.':>8s} {'failed':>6s} "
        f"{'uninterrupted x':>16s} {'ratio x (min..max)':>20s} {'probe slowed x':>16s} {'unexplained x':>16s} "
        f"{'spread (max)':>12s} {'load avg':>8s} {'s/run':>6s}"
    ]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["condition"], r["evidence"]), []).append(r)
    for (condition, evidence), runs in groups.items():
        count = {v: sum(1 for r in runs if r["verdict"] == v) for v in ("passed", "inconclusive", "failed")}
        rel = [r["forward"]["relative"] for r in runs if "relative" in r.get("forward", {})]
        spread = [r["forward"]["spread"] for r in runs if "spread" in r.get("forward", {})]
        quiet = [r["forward"]["quiet_x"] for r in runs if r.get("forward", {}).get("quiet_x") is not None]
        probe = [x for r in runs for x in r.get("forward", {}).get("load_x", [])]
        unexplained = [r["forward"]["unexplained"] for r in runs if "unexplained" in r.get("forward", {})]
        lines.append(
            f"{condition:30s} {evidence:10s} {count['passed']:6d} {count['inconclusive']:8d} "
            f"{count['failed']:6d} {_range(quiet):>16s} {_range(rel):>20s} {_range(probe):>16s} "
            f"{_range(unexplained):>16s} {(f'x{max(spread):.2f}' if spread else '-'):>12s} "
            f"{sum(r['load'] for r in runs) / len(runs):8.2f} "
            f"{sum(r['seconds'] for r in runs) / len(runs):6.1f}"
        )
    return "\n".join(lines)


def _range(values: list[float]) -> str:
    return f"x{min(values):.2f}..x{max(values):.2f}" if values else "-"


if __name__ == "__main__":
    sys.exit(main())
