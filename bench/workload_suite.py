#!/usr/bin/env python3
"""Workload suite: TTFT, TPOT, tokens/s (generation) or throughput (encoders), eager vs the
optimizer's confirmed choice, with spread and the decode bandwidth percentage, per model, one run.

For each demo model (demo_models/: tiny Llama, Qwen2, GPT-2, T5, BART, BERT, ViT, Whisper as
configs; all of them by default) this renders a real adaptation with the shared CPU torch test
environment as its interpreter, then:
  1. the environment probe (ascendbridge/gatekit/inner/probe.py) once: the measured copy bandwidth;
  2. the optimizer's search and confirmation on the workload's headline (`python -m
     ab_runtime.optimize`, by default over the optimizer's own catalogue for CPU: every CPU pass and,
     for generation models, the decode passes, `cpu_static_cache_compile` measured and the CUDA /
     NPU ones listed as not applicable; `--passes` narrows it): its confirmed choice and speedup,
     and each decode pass's verdict;
  3. one process measuring the workload (ab_runtime.workloads.measure, the benchmark's code) for the
     eager baseline and for the confirmed choice, with the same harness, warmup and iterations.
Printed per model (as each finishes): TTFT / TPOT (median ± stdev) / tokens/s at batch 1 and at the larger batch, the
decode bandwidth as % of the probe's, greedy agreement with the CPU float32 reference, for eager
and the choice; for encoders the sweep's best throughput and knee.

  uv run python bench/workload_suite.py [--models tiny-gpt2,tiny-bert] [--passes cpu_threads_1,...]
      [--prompt-len 16] [--new-tokens 8] [--iters 3] [--out bench_workloads.json]

CPU figures on a shared machine are load-dominated: the run prints the load average with them.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from itertools import chain
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ascendbridge.package.generator import render_adaptation  # noqa: E402
from ascendbridge.package.spec import (  # noqa: E402
    RESULT_MARKER,
    AdaptationSpec,
    DtypePolicy,
    InputRecipe,
    ModelSource,
    WorkloadSpec,
)
from bench.support.torch_env import torch_env_python  # noqa: E402

DEMO = REPO / "demo_models"
print = functools.partial(print, flush=True)  # progress shows while a long run goes on
TORCHINDUCTOR_CACHE = REPO / ".cache" / "torchinductor"  # compiled kernels survive between runs
# Runs inside the adaptation's interpreter: the eager baseline and the chosen passes, one harness.
MEASURE = """
import json, sys
from ab_runtime import harness, workloads
from ab_runtime.optimize import passes
chosen = [n for n in sys.argv[1].split(",") if n]
warmup, iters = int(sys.argv[2]), int(sys.argv[3])
session = harness.open_session("adaptation.json", "cpu", False, 1)
out = {}
for label, names in (("eager", []), ("chosen", chosen)):
    if label == "chosen" and not names:
        break
    build, run, _ = session.make(passes.get(names))
    out[label] = workloads.measure(session, build, run, warmup, iters)
print("WORKLOADS " + json.dumps(out))
"""


def render(
    root: Path, name: str, info: dict[str, Any], python: Path, inputs: InputRecipe, workload: WorkloadSpec
) -> Path:
    """A demo model's float32 adaptation under root/name, run by the given torch interpreter."""
    config = json.loads((DEMO / name / "config.json").read_text())
    spec = AdaptationSpec(
        name=name,
        model=ModelSource(model_id=info["model_id"], source="local", path=str(DEMO / name), has_weights=False),
        task_family=info["task_family"],
        model_class=info["architecture"],
        model_type=config["model_type"],
        inputs=inputs,
        dtype=DtypePolicy(target="float32"),
        workload=workload,
    )
    directory = root / name
    render_adaptation(spec, directory)
    (directory / ".venv").symlink_to(python.absolute().parent.parent, target_is_directory=True)
    return directory


def run(argv: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": os.environ.get("TORCHINDUCTOR_CACHE_DIR", str(TORCHINDUCTOR_CACHE))}
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def probe_bandwidth(python: Path) -> float:
    proc = run(
        [str(python), str(REPO / "benchmark" / "inner" / "probe.py"), "--device", "cpu", "--budget-s", "0.3"], REPO, 300
    )
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["peaks"]["bandwidth_gbs"])


def optimize_argv(directory: Path, pairs: int, iters: int, *extra: str) -> list[str]:
    """The rendered adaptation's own optimizer search on CPU (run it in `directory`)."""
    flags = {"--device": "cpu", "--pairs": str(pairs), "--iters": str(iters)}
    python = directory / ".venv" / "bin" / "python"
    return [str(python), "-m", "ab_runtime.optimize", *chain.from_iterable(flags.items()), *extra]


def optimize(directory: Path, pass_names: str, timeout: float) -> dict[str, Any]:
    """The search's RESULT plus each decode pass's verdict from its notes (name -> kept / reason)."""
    passes = ["--passes", pass_names] if pass_names else []
    proc = run(optimize_argv(directory, 5, 1, "--warmup", "1", *passes), directory, timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_MARKER)]
    result = json.loads(lines[-1][len(RESULT_MARKER) :]) if lines else {"ok": False, "error": proc.stderr[-300:]}
    notes = directory / "optimization_notes.json"
    if notes.is_file():
        rows = json.loads(notes.read_text())["passes"]
        result["decode_passes"] = {
            r["name"]: {
                "kept": r["kept"],
                "reason": r["reason"],
                "speedup": (r.get("paired") or {}).get("speedup"),
                "generation": (r.get("accuracy") or {}).get("generation"),
            }
            for r in rows
            if r.get("kind") == "decode"
        }
    return result


def measure(directory: Path, chosen: list[str], warmup: int, iters: int, timeout: float) -> dict[str, Any]:
    proc = run(
        [
            str(directory / ".venv" / "bin" / "python"),
            "-W",
            "ignore",
            "-c",
            MEASURE,
            ",".join(chosen),
            str(warmup),
            str(iters),
        ],
        directory,
        timeout,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("WORKLOADS ")]
    if not lines:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}")
    return json.loads(lines[-1][len("WORKLOADS ") :])


def each_model(
    names: list[str],
    manifest: dict[str, Any],
    python: Path,
    workload: WorkloadSpec,
    fill: Callable[[Path, dict[str, Any]], None],
    errors: tuple[type[Exception], ...],
    show: Callable[[dict[str, Any]], None],
    heading: Callable[[dict[str, Any]], str],
) -> list[dict[str, Any]]:
    """Render each demo model in a scratch folder and `fill` its entry there, printing `heading` and
    then the error it raised (kept in the entry) or `show`; the entries, one a model, in order."""
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            directory = render(Path(tmp), name, manifest[name], python, InputRecipe(seq_len=16), workload)
            entry: dict[str, Any] = {"model": name}
            try:
                fill(directory, entry)
            except errors as exc:
                entry["error"] = str(exc)
            results.append(entry)
            print(f"\n{heading(entry)}")
            if "error" in entry:
                print(f"  error: {entry['error']}")
            else:
                show(entry)
    return results


def finish(out: str, results: list[dict[str, Any]], start: float, **extra: Any) -> int:
    """Write the suite's JSON (`extra`, the load, the wall time and the models) and say where; exit
    1 when any model failed."""
    wall = time.perf_counter() - start
    Path(out).write_text(
        json.dumps({**extra, "load_average": os.getloadavg()[0], "wall_s": wall, "models": results}, indent=2) + "\n"
    )
    print(f"\n{len(results)} model(s) in {wall:.0f} s -> {out}")
    return 0 if all("error" not in r for r in results) else 1


def describe(body: dict[str, Any], bandwidth: float) -> str:
    if "runs" in body:
        parts = []
        for r in body["runs"]:
            pct = 100.0 * r["decode_bandwidth_gbs"] / bandwidth
            parts.append(
                f"b{r['batch']}: TTFT {r['ttft_ms']['median_ms']:.2f}±{r['ttft_ms']['stdev_ms']:.2f} ms, "
                f"TPOT {r['tpot_ms']['median_ms']:.2f}±{r['tpot_ms']['stdev_ms']:.2f} ms, "
                f"{r['tokens_per_s']:.0f} tok/s, bw {pct:.2f}%"
                + (f", encoder {r['encoder_ms']['median_ms']:.2f} ms" if "encoder_ms" in r else "")
            )
        agree = body["greedy_vs_reference"]
        return (
            "; ".join(parts) + f"; greedy match {agree['match_rate']:.2f}, first divergence {agree['first_divergence']}"
        )
    points = ", ".join(f"b{p['batch']} {p['samples_per_s']:.0f}/s (±{p['stdev_ms']:.2f} ms)" for p in body["points"])
    return f"sweep {points}; knee at batch {body['knee_batch']}" + (f"; {body['stopped']}" if body["stopped"] else "")


def main() -> int:
    manifest = json.loads((DEMO / "manifest.json").read_text())["models"]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(manifest), help="demo models (default: all of demo_models/)")
    p.add_argument(
        "--passes",
        default="",
        help="catalogue passes the optimizer may choose from (default: the "
        "optimizer's own catalogue for CPU, decode passes included)",
    )
    p.add_argument("--prompt-len", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=8)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--sweep", default="1,8,32")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per model step")
    p.add_argument("--out", default="bench_workloads.json")
    args = p.parse_args()
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in manifest]
    if unknown:
        print(f"error: unknown demo model(s) {', '.join(unknown)} (known: {', '.join(manifest)})", file=sys.stderr)
        return 2
    workload = WorkloadSpec(
        prompt_len=args.prompt_len,
        new_tokens=args.new_tokens,
        batch=args.batch,
        sweep=[int(b) for b in args.sweep.split(",")],
        headline_batch=8,
    )
    python = torch_env_python()
    start = time.perf_counter()
    bandwidth = probe_bandwidth(python)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; probe copy bandwidth {bandwidth:.1f} GB/s")

    def fill(directory: Path, entry: dict[str, Any]) -> None:
        entry["task_family"] = manifest[entry["model"]]["task_family"]
        opt = optimize(directory, args.passes, args.timeout)
        entry["choice"] = {
            "passes": opt.get("chosen") or [],
            "confirmed_speedup": opt.get("speedup"),
            "outcome": opt.get("outcome"),
            "error": opt.get("error"),
        }
        entry["decode_passes"] = opt.get("decode_passes") or {}
        entry.update(measure(directory, entry["choice"]["passes"], args.warmup, args.iters, args.timeout))

    def show(entry: dict[str, Any]) -> None:
        choice = entry["choice"]
        print(
            f"  optimizer (headline, confirmed): {'+'.join(choice['passes']) or 'eager'} "
            f"x{choice['confirmed_speedup'] or 1:.2f} ({choice['outcome'] or choice['error']})"
        )
        for pass_name, verdict in entry["decode_passes"].items():
            figure = f" x{verdict['speedup']:.2f}" if verdict["speedup"] else ""
            print(
                f"  decode pass {pass_name}: {'KEPT' if verdict['kept'] else 'rejected'}{figure} - {verdict['reason']}"
            )
        for label in ("eager", "chosen"):
            if entry.get(label):
                print(f"  {label:6s} {describe(entry[label], bandwidth)}")

    results = each_model(
        names,
        manifest,
        python,
        workload,
        fill,
        (RuntimeError, subprocess.TimeoutExpired),
        show,
        lambda entry: f"{entry['model']} ({entry['task_family']})",
    )
    return finish(args.out, results, start, probe_bandwidth_gbs=bandwidth)


if __name__ == "__main__":
    raise SystemExit(main())
