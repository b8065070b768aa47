"""The benchmark run behind every adaptation's accuracy_run.py (a thin generated wrapper).

What it does, in order: open a harness Session (the model built once on CPU in float32,
config-initialised and seeded or real weights, a float64 copy as the exact reference where it
fits, the seeded input samples); build the target on the device in the target dtype; run every
sample through it; compare with the shared comparator; time the reference and the target with
the same warmup and iterations (profiler off, device synchronised around each call), the target's
calls each followed by one call of the fixed calibration probe (ab_runtime/calibration.py: the gate
judges the latency relative to it, so the host's load cannot flip the verdict); then one separate
profiled run exported as a Chrome trace.

Writes, named <kind>_<device>_<dtype>_<mode>_<dataset>.<ext>:
  outputs_*.pt               target / reference / float64 outputs and the inputs
  trace_*.json               Chrome trace (open in https://ui.perfetto.dev)
  benchmark_metrics_*.json   latency, throughput, peak memory, accuracy per output, environment
The last line printed is `ASCENDBRIDGE_RESULT {json}`. Exit 0: evidence written and accuracy
passed; 2: evidence written, accuracy failed; 1: the run failed (error on stderr).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .. import build as ab_build
from .. import calibration, harness, precision, sizing, workloads
from .. import device as ab_device
from ..errors import DtypeRefused, RuntimeDiagnosis
from ..measure import profile_forward, throughput
from ..metrics_file import METRICS_SCHEMA, evidence_names
from ..ops.record import record_target
from ..result import run_main

DATASETS = ("synthetic",)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Accuracy and latency evidence for this adaptation.")
    p.add_argument("--device", default="auto", choices=ab_device.DEVICE_CHOICES)
    p.add_argument("--dtype", default=None, choices=sorted(harness.DTYPES), help="target dtype (default: spec)")
    p.add_argument("--use-pretrained", action="store_true", help="real weights (default: config-initialised)")
    p.add_argument("--num-samples", type=int, default=2, help="seeded input batches compared")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls before timing (same for both runs)")
    p.add_argument("--iters", type=int, default=10, help="timed calls (at most: see --budget-s)")
    p.add_argument(
        "--budget-s",
        type=float,
        default=sizing.BUDGET_S,
        help=f"seconds one timing may spend: fewer timed calls (never under {sizing.FLOOR}) when one call says "
        "--iters would not fit",
    )
    p.add_argument("--dataset", default="synthetic", help="input source (only 'synthetic' here)")
    p.add_argument("--profile-steps", type=int, default=2, help="forward calls in the profiled run")
    p.add_argument(
        "--workload",
        default=None,
        choices=workloads.WORKLOADS,
        help="workload profile (default: the spec's, else the task family's)",
    )
    p.add_argument("--spec", default="adaptation.json")
    p.add_argument("--out-dir", default=".", help="where the evidence files go")
    p.add_argument("--op-profile", default=None, help="also record the target's ATen ops (untimed) into this file")
    args = p.parse_args(argv)
    if args.num_samples < 1 or args.iters < 1 or args.warmup < 0 or args.profile_steps < 1 or not args.budget_s > 0:
        raise harness.HarnessError(
            "--num-samples, --iters and --profile-steps must be >= 1, --warmup >= 0, --budget-s > 0"
        )
    if args.dataset not in DATASETS:
        raise harness.HarnessError(
            f"dataset '{args.dataset}' is not available here (choices: {', '.join(DATASETS)}); "
            "real datasets belong to the business benchmark stage"
        )
    return args


def target_outputs(session: harness.Session, target: ab_build.Build, target_run: Any) -> dict[str, Any]:
    """The target's outputs; a lower-precision run that fails is probed module by module, and an
    operator refusing the dtype becomes a DtypeRefused finding instead of a bare traceback."""
    try:
        return session.outputs(target, target_run)
    except Exception:
        if session.baseline_dtype == harness.DTYPES["float32"]:
            raise
        inputs = ab_build.prepare_inputs(session.samples[0], session.choice.torch_device, target)
        found = precision.probe_dtype_failure(target.model, lambda: target_run(inputs))
        if found is None:
            raise
        raise DtypeRefused(
            {
                **found,
                "dtype": session.baseline_dtype_name,
                "device": session.choice.kind,
                "kept_fp32": list(session.spec.keep_fp32_modules),
            }
        ) from None


def run(args: argparse.Namespace) -> dict[str, Any]:
    session = harness.open_session(
        Path(args.spec), args.device, args.use_pretrained, args.num_samples, args.dtype, args.workload
    )
    session.budget_s = args.budget_s
    spec, choice, dtype_name, mode = session.spec, session.choice, session.baseline_dtype_name, session.mode
    out_dir = Path(args.out_dir)
    files = evidence_names("benchmark", choice.kind, dtype_name, mode, args.dataset)
    summary = _say_built(session)

    target, target_run, _ = session.make([])
    target_out = target_outputs(session, target, target_run)
    accuracy = session.accuracy(target, target_out)
    failed = accuracy["failed_outputs"] + accuracy["problems"]
    harness.say(f"accuracy vs reference: {accuracy['verdict']}" + (f" (failed: {', '.join(failed)})" if failed else ""))

    reference_timing = session.time(session.reference_call(), args.warmup, args.iters, on_device=False).as_dict()
    target_fn = session.timed_call(target, target_run)
    ab_device.reset_peak_memory(choice)
    measured, probe_ms = session.time_calibrated(target_fn, args.warmup, args.iters)
    timing = measured.as_dict()
    peak = ab_device.peak_memory(choice)
    peak_source = "device_allocator"
    if peak is None:
        peak, peak_source = ab_device.host_peak_rss(), "host_peak_rss"
    harness.say(
        f"latency {choice.kind} {dtype_name}: median {timing['median_ms']:.3f} ms, p90 {timing['p90_ms']:.3f} ms "
        f"(reference CPU float32 median {reference_timing['median_ms']:.3f} ms; warmup {args.warmup}, "
        f"iters {timing['iterations']}, reference iters {reference_timing['iterations']})"
    )

    workload = workloads.measure(session, target, target_run, args.warmup, args.iters)
    if workload is not None:
        harness.say(f"workload {session.workload.name}: {headline_text(workload)}")
    budget_ended = budget_lines(reference_timing, timing, workload)
    for line in budget_ended:
        harness.say(line)

    outputs_sha = harness.save_run_outputs(
        session, out_dir / files["outputs"], dtype_name, args.dataset, target_out, []
    )
    profile = profile_forward(target_fn, session.sync, choice.kind, out_dir / files["trace"], steps=args.profile_steps)
    harness.say(f"profiled run: {profile['events']} trace events -> {files['trace']}")
    if args.op_profile:  # docs/operators.md: one untimed pass, after every timed one
        harness.write_json(out_dir / args.op_profile, record_target(session, target))

    run = harness.run_record(session, args.device, dtype_name, args.dataset, args.num_samples)
    run["reference"]["float64_note"] = session.fp64_note
    batch = spec.recipe.batch_size
    metrics = {
        **harness.record_header(METRICS_SCHEMA, spec),
        "run": run,
        "model": summary,
        "inputs": harness.input_shapes(session),
        "timing": timing,
        "reference_timing": reference_timing,
        "profiler_during_timing": False,
        "calibration": calibration.calibration_block(timing["samples_ms"], probe_ms, args.warmup, "timing.samples_ms"),
        "throughput": {"batch_size": batch, "samples_per_s": throughput(batch, timing["median_ms"])},
        "peak_memory_bytes": peak,
        "peak_memory_source": peak_source,
        "accuracy": accuracy,
        "environment": harness.environment(session),
        "profile": profile,
        "workload": workload,
        "evidence": {"outputs": files["outputs"], "trace": files["trace"], "outputs_sha256": outputs_sha},
    }
    harness.write_json(out_dir / files["metrics"], metrics)
    harness.say(f"evidence: {files['metrics']}, {files['outputs']}, {files['trace']}")
    return {
        "ok": True,
        "verdict": accuracy["verdict"],
        "device": choice.kind,
        "device_name": choice.name,
        "dtype": dtype_name,
        "mode": mode,
        "dataset": args.dataset,
        "median_ms": timing["median_ms"],
        "min_ms": timing["min_ms"],
        "p90_ms": timing["p90_ms"],
        "reference_median_ms": reference_timing["median_ms"],
        "samples_per_s": metrics["throughput"]["samples_per_s"],
        "peak_memory_bytes": peak,
        "metrics": files["metrics"],
        "outputs": files["outputs"],
        "trace": files["trace"],
        "failed_outputs": accuracy["failed_outputs"],
        "reference_fp64": session.fp64_note,
        "keep_fp32_modules": list(spec.keep_fp32_modules),
        "workload": session.workload.name,
        "workload_figures": workload["headline"] if workload else None,
        "op_profile": args.op_profile,
        "budget_ended": budget_ended,
        "error": None,
    }


def _say_built(session: harness.Session) -> dict[str, Any]:
    """Say what was built against what (the model, its target, the references); the model's summary."""
    spec, choice, mode = session.spec, session.choice, session.mode
    summary = harness.model_summary(session)
    harness.say(
        f"model {spec.model_id} ({spec.task_family}), target {choice.kind} ({choice.name}) {session.baseline_dtype_name}"
    )
    harness.say(
        f"built {summary['class']} ({session.loaded.origin}, mode {mode}): {summary['parameters']:,} parameters, "
        f"layers {summary['layers_built']}/{summary['layers_total']}"
        f"{' (depth reduced)' if summary['depth_reduced'] else ''}"
    )
    for note in session.loaded.notes:
        harness.say(f"note: {note}")
    harness.say(f"reference: CPU float32; float64 reference {session.fp64_note}")
    return summary


def budget_lines(
    reference_timing: dict[str, Any], timing: dict[str, Any], workload: dict[str, Any] | None
) -> list[str]:
    """One line per measurement a budget, not the evidence, ended (ab_runtime/sizing.py)."""
    records = [("reference timing", reference_timing.get("sizing")), ("target timing", timing.get("sizing"))]
    for key in ("runs", "points"):
        records += [(f"workload at batch {e.get('batch')}", e.get("sizing")) for e in (workload or {}).get(key) or []]
    return [line for where, record in records if (line := sizing.budget_line(where, record))]


def headline_text(workload: dict[str, Any]) -> str:
    """The workload's headline figures as one line for people."""
    h = workload["headline"]
    if "tpot_ms" in h:
        agree = workload.get("greedy_vs_reference") or {}
        first = agree.get("first_divergence")
        return (
            f"TTFT {h['ttft_ms']:.3f} ms, TPOT {h['tpot_ms']:.3f} ms, {h['tokens_per_s']:.1f} tokens/s at batch 1, "
            f"{h['batch_tokens_per_s']:.1f} tokens/s at batch {h['batch']}; greedy tokens vs CPU float32 "
            f"reference: match {agree.get('match_rate', 0):.2f}, "
            + ("no divergence" if first is None else f"first divergence at token {first}")
        )
    return (
        f"throughput {h['throughput_samples_per_s']:.1f} samples/s (knee at batch {workload['knee_batch']}), "
        f"batch-1 latency {h['batch1_latency_ms'] or float('nan'):.3f} ms"
        + (f"; sweep stopped: {workload['stopped']}" if workload.get("stopped") else "")
    )


def _finding(exc: BaseException, result: dict[str, Any]) -> None:
    """A refusing operator's finding: its own marked line, and in the RESULT."""
    if isinstance(exc, DtypeRefused):
        print(precision.FINDING_MARKER + json.dumps(exc.finding, sort_keys=True, default=str), flush=True)
        result["finding"] = exc.finding


def main(argv: list[str]) -> int:
    return run_main(
        lambda: run(parse_args(argv)),
        lambda result: 0 if result["verdict"] == "pass" else 2,
        failures=(harness.HarnessError, RuntimeDiagnosis),
        on_failure=_finding,
    )
