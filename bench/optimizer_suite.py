#!/usr/bin/env python3
"""Optimizer suite: eager vs torch.compile vs each single pass vs the optimizer's choice, per model.

For every tiny demo architecture (demo_models/: 9 models, 7 task families) this renders a real
adaptation (generator output, runtime copied verbatim), gives it the shared CPU torch test
environment as its interpreter and runs the optimizer's search (`python -m ab_runtime.optimize`)
over the whole CPU catalogue. One search measures, against the same eager baseline, PAIRED and
INTERLEAVED, with accuracy checked against the float32 baseline outputs:
  * torch.compile alone (cpu_compile) and every other single pass alone (bf16 autocast, bf16 cast,
    int8 dynamic, threads, channels_last where a model has convolutions);
  * the optimizer's selection (kept passes combined greedily), then its confirmation: a fresh
    process re-measures baseline vs the selection (ab_runtime.optimize.confirm) and only that figure is
    reported; kept only when its interval clears 1 + min_gain, otherwise "no gain".
Printed per model: the selection figure and the confirmed figure side by side (the winner's
curse, measured), the confirmed choice next to torch.compile alone and bf16 autocast alone, then
every single pass (accuracy failures marked "acc-fail" and excluded) and the geometric means.
Environment settings (thread counts) in a choice are marked "env": they describe this machine's
load, not the model. Targets checked: the confirmed choice is never slower than the best
accuracy-passing single alternative beyond noise, and the geomean of the choice >= 2x.

  uv run python bench/optimizer_suite.py [--models tiny-llama,tiny-vit] [--batch 4] [--seq-len 128]
      [--pairs 5] [--iters 5] [--jobs 1] [--out bench_optimizer.json]

The machine's load is printed with the results: on a shared CPU the intervals widen and fewer
passes clear the noise, which is the intended, honest behaviour.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ab_runtime.pairstats import geomean  # noqa: E402
from ascendbridge.package.spec import RESULT_MARKER, InputRecipe, WorkloadSpec  # noqa: E402
from bench.support.torch_env import torch_env_python  # noqa: E402
from bench.workload_suite import optimize_argv, render  # noqa: E402

DEMO = REPO / "demo_models"
COLUMNS = (
    "cpu_compile",
    "cpu_bf16_autocast",
    "cpu_bf16_cast",
    "cpu_int8_dynamic",
    "cpu_threads_1",
    "cpu_threads_all",
    "cpu_channels_last",
)


def search(directory: Path, pairs: int, iters: int, timeout: float) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        argv = optimize_argv(directory, pairs, iters)
        proc = subprocess.run(argv, cwd=directory, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {
            "result": {"ok": False, "error": f"search timed out after {timeout:.0f} s"},
            "notes": None,
            "wall_s": time.perf_counter() - start,
        }
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_MARKER)]
    result = json.loads(lines[-1][len(RESULT_MARKER) :]) if lines else {"ok": False, "error": proc.stderr[-500:]}
    notes = json.loads((directory / "optimization_notes.json").read_text()) if result.get("ok") else None
    return {"result": result, "notes": notes, "wall_s": time.perf_counter() - start}


def cell(row: dict[str, Any] | None) -> dict[str, Any]:
    """One column of one model: speedup, interval, accuracy verdict, or why it was not measured."""
    if row is None:
        return {"status": "absent"}
    if not row.get("measured"):
        return {"status": "not measured", "reason": row.get("reason", "")}
    p = row["paired"]
    return {
        "status": "measured",
        "speedup": p["speedup"],
        "interval": p["interval"],
        "accuracy": row["accuracy"]["verdict"],
        "kept": row["kept"],
        "first_call_ms": row["cold_start"]["first_call_ms"],
    }


def summarize(name: str, run: dict[str, Any]) -> dict[str, Any]:
    notes = run["notes"]
    if notes is None:
        return {"model": name, "error": run["result"].get("error"), "wall_s": run["wall_s"]}
    singles = {r["name"]: r for r in notes["passes"]}
    cells = {c: cell(singles.get(c)) for c in COLUMNS}
    final, selection = notes["final"], notes["selection"]
    choice = {
        "passes": notes["chosen"],
        "speedup": final["speedup"],
        "interval": final.get("interval", [1.0, 1.0]),
        "accuracy": (final.get("accuracy") or {}).get("verdict", "pass"),
        "outcome": final["outcome"],
        "environment_settings": final.get("environment_settings", []),
        "selection_passes": selection["passes"],
        "selection_speedup": selection["speedup"],
        "confirmed_speedup": final.get("confirmed_speedup", final["speedup"]),
    }
    gated = [(c, v) for c, v in cells.items() if v["status"] == "measured" and v["accuracy"] == "pass"]
    best = max(gated, key=lambda cv: cv[1]["speedup"], default=None)
    verdict = "ok"
    if best is not None and best[1]["speedup"] > 1.0 and choice["speedup"] < best[1]["interval"][0]:
        verdict = f"SLOWER than {best[0]} beyond noise"
    return {
        "model": name,
        "baseline_ms": final.get("baseline_median_ms")
        or next((r["paired"]["baseline_median_ms"] for r in notes["passes"] if r.get("measured")), None),
        "columns": cells,
        "choice": choice,
        "best_single": best[0] if best else None,
        "choice_vs_best": verdict,
        "wall_s": run["wall_s"],
        "bf16_gemm_speedup": notes["traits"]["bf16_gemm_speedup"],
    }


def fmt(c: dict[str, Any]) -> str:
    if c.get("status") != "measured":
        return "n/a"
    text = f"{c['speedup']:.2f} [{c['interval'][0]:.2f},{c['interval'][1]:.2f}]"
    return text + (" acc-fail" if c["accuracy"] != "pass" else "")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    manifest = json.loads((DEMO / "manifest.json").read_text())["models"]
    parser.add_argument("--models", default=",".join(manifest))
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=1, help="searches run at once (more than one competes for the CPU)")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--out", default="bench_optimizer.json")
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in manifest]
    if unknown or args.pairs < 5 or args.jobs < 1:
        print(
            f"error: unknown model(s) {', '.join(unknown)}" if unknown else "error: --pairs >= 5 and --jobs >= 1",
            file=sys.stderr,
        )
        return 2
    python = torch_env_python()
    load_before = os.getloadavg()
    print(
        f"optimizer suite: {len(names)} models, batch {args.batch} x seq {args.seq_len}, {args.pairs} pairs x "
        f"{args.iters} iters, {args.jobs} at once; load average {load_before[0]:.1f} on {os.cpu_count()} CPUs",
        flush=True,
    )
    inputs = InputRecipe(batch_size=args.batch, seq_len=args.seq_len)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="optimizer-suite-") as tmp:
        dirs = {n: render(Path(tmp), n, manifest[n], python, inputs, WorkloadSpec()) for n in names}
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {n: pool.submit(search, dirs[n], args.pairs, args.iters, args.timeout) for n in names}
            rows = []
            for n in names:
                rows.append(summarize(n, futures[n].result()))
                print(f"  {n}: done in {rows[-1]['wall_s']:.0f} s", flush=True)
    print("\nthe winner's curse, measured: the search's own figure for its selection vs a fresh confirmation run,")
    print("and the confirmed choice next to torch.compile alone and bf16 autocast alone (speedup over eager)")
    print(
        f"{'model':22s} {'eager ms':>9s} {'selected':>28s} {'search x':>9s} {'confirmed x':>12s} "
        f"{'compile alone':>22s} {'bf16 autocast alone':>22s}  reported choice"
    )
    for r in rows:
        if "error" in r:
            print(f"{r['model']:22s} search failed: {r['error']}")
            continue
        ch, base = r["choice"], f"{r['baseline_ms']:.2f}" if r["baseline_ms"] else "-"
        selected = "+".join(ch["selection_passes"]) or "nothing"
        env = f" (env: {'+'.join(ch['environment_settings'])})" if ch["environment_settings"] else ""
        reported = (
            f"{'+'.join(ch['passes'])} x{ch['speedup']:.2f} [{ch['interval'][0]:.2f},{ch['interval'][1]:.2f}]"
            if ch["passes"]
            else "no gain (baseline kept)"
        )
        print(
            f"{r['model']:22s} {base:>9s} {selected[:28]:>28s} {ch['selection_speedup']:>9.2f} "
            f"{ch['confirmed_speedup']:>12.2f} {fmt(r['columns']['cpu_compile']):>22s} "
            f"{fmt(r['columns']['cpu_bf16_autocast']):>22s}  {reported}{env} ({r['choice_vs_best']})"
        )
    print(
        "\nevery single pass alone (search measurements), paired median ratio [sign-test interval]; n/a = not "
        "applicable / not measured"
    )
    print(f"{'model':22s} " + " ".join(f"{c.replace('cpu_', ''):>22s}" for c in COLUMNS))
    for r in rows:
        if "error" not in r:
            print(f"{r['model']:22s} " + " ".join(f"{fmt(r['columns'][c]):>22s}" for c in COLUMNS))
    ok_rows = [r for r in rows if "error" not in r]
    geo = {
        c: geomean(
            [
                r["columns"][c]["speedup"]
                for r in ok_rows
                if r["columns"][c].get("status") == "measured" and r["columns"][c]["accuracy"] == "pass"
            ]
        )
        for c in COLUMNS
    }
    geo_choice = geomean([s for r in ok_rows if (s := r["choice"]["speedup"] or 0) > 0])  # a failed choice: none
    geo_selection = geomean([s for r in ok_rows if (s := r["choice"]["selection_speedup"] or 0) > 0])
    print(
        "geomean (accuracy-passing measured rows): "
        + ", ".join(f"{c.replace('cpu_', '')} {g:.2f}" for c, g in geo.items() if g)
        + f"; optimizer: search's figure {geo_selection or 0:.2f}, confirmed {geo_choice or 0:.2f}"
    )
    never_slower = all(r["choice_vs_best"] == "ok" for r in ok_rows)
    load_after = os.getloadavg()
    print(
        f"targets: choice never slower than the best single alternative beyond noise: "
        f"{'MET' if never_slower else 'NOT MET'}; geomean choice >= 2x: "
        f"{'MET' if (geo_choice or 0) >= 2 else 'NOT MET'} ({geo_choice or 0:.2f}x)"
    )
    print(
        f"wall {time.perf_counter() - start:.0f} s; load average before {load_before[0]:.1f}, after {load_after[0]:.1f}"
    )
    Path(args.out).write_text(
        json.dumps(
            {
                "settings": vars(args),
                "load_average": [load_before, load_after],
                "models": rows,
                "geomean": geo,
                "geomean_choice": geo_choice,
                "geomean_selection": geo_selection,
                "never_slower": never_slower,
            },
            indent=2,
            default=str,
        )
        + "\n"
    )
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
