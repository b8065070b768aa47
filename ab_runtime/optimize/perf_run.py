"""The optimized run behind accuracy_run_perf.py: chosen passes applied, evidence in benchmark format.

Builds the float32 reference (and a float64 one where it fits), the baseline (spec dtype, eager)
and the optimized model (the chosen passes, from the same weights); compares the optimized
outputs with the float32 reference outputs by the one optimization budget (never the standard of
the dtype the passes compute in); times baseline and optimized PAIRED and INTERLEAVED; then one separate profiled run.
Writes perf_<kind>_<device>_<dtype>_<mode>_<dataset>.<ext> files in the benchmark metrics schema
(`timing` = optimized, `reference_timing` = the un-optimized baseline from the same pairs), so
the benchmark gate's checks, accuracy recomputation and re-execution (which applies the same
passes) serve the perf gate unchanged; the `perf_` prefix keeps them out of the benchmark
gate's `benchmark_metrics_*.json`. Building, inputs and timing come from ab_runtime.harness.
What the pairs time is the workload's headline call, the one the optimizer optimized (a batch-1
greedy generation for generation workloads, a forward at the headline batch for a sweep, else the
accuracy forward); for a generation or sweep workload the `workload` block (workloads.measure:
TTFT / TPOT / tokens/s or the sweep, of the optimized configuration, re-derived by the perf gate)
is added, and for generation the greedy tokens are judged too (`optimization.generation_accuracy`):
the run passes accuracy only when the forward outputs and the greedy tokens both pass.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .. import device as ab_device
from .. import harness, workloads
from ..errors import RuntimeDiagnosis
from ..measure import profile_forward, summarize, throughput
from ..metrics_file import METRICS_SCHEMA, evidence_names
from ..result import run_main
from . import passes
from .optimize import environment, generation_accuracy, sequential_paired


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Optimized run: the chosen passes, paired against the baseline.")
    p.add_argument("--device", default="cpu", choices=ab_device.DEVICE_CHOICES)
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--num-samples", type=int, default=2)
    p.add_argument("--profile-steps", type=int, default=2)
    p.add_argument("--dataset", default="synthetic", choices=("synthetic",))
    p.add_argument("--use-pretrained", action="store_true")
    p.add_argument("--workload", default=None, help="workload the optimizer optimized (default: the spec's)")
    p.add_argument("--spec", default="adaptation.json")
    p.add_argument("--out-dir", default=".")
    args = p.parse_args(argv)
    if args.pairs < 5 or args.iters < 1 or args.warmup < 0 or args.num_samples < 1 or args.profile_steps < 1:
        raise harness.HarnessError(
            "--pairs must be >= 5, --iters, --num-samples and --profile-steps >= 1, --warmup >= 0"
        )
    return args


def run(args: argparse.Namespace, chosen_names: list[str]) -> dict[str, Any]:
    return evidence(args, chosen_names)[0]


def evidence(
    args: argparse.Namespace, chosen_names: list[str], decided: Callable[[list[float]], bool] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Write the perf evidence; (the RESULT, the paired figures with their raw samples). The
    confirmation run (confirm.py) calls this too: its pairs are then the confirmation's, taken one
    at a time until `decided` (at most `--pairs`); without it, a fixed `--pairs`."""
    chosen = passes.get(chosen_names)
    session = _session_for(args, chosen)
    base_build, base_run, _ = session.make([])
    b, run_opt, build_s = session.make(chosen)
    for key, value in b.env.items():
        harness.say(f"note: pass environment {key}={value} must be set before torch_npu loads (set it in the shell)")
    opt_out = session.outputs(b, run_opt)
    accuracy = session.judge_optimized(b, opt_out)
    harness.say(
        f"accuracy vs float32 reference (optimization budget, computed in {b.accuracy_dtype}): {accuracy['verdict']}"
    )
    base_fn, opt_fn = session.headline_call(base_build, base_run), session.headline_call(b, run_opt)
    workload = workloads.measure(session, b, run_opt, args.warmup, args.iters)
    generation = _greedy_tokens(session, opt_fn, workload)
    figures = (
        harness.paired(session, base_fn, opt_fn, args.pairs, args.warmup, args.iters)
        if decided is None
        else sequential_paired(session, base_fn, opt_fn, args.pairs, args.warmup, args.iters, decided)
    )
    timing = summarize(figures["candidate_samples_ms"], args.warmup).as_dict()
    reference_timing = summarize(figures["baseline_samples_ms"], args.warmup).as_dict()
    harness.say(
        f"paired: baseline median {figures['baseline_median_ms']:.3f} ms, optimized {figures['candidate_median_ms']:.3f} ms, "
        f"x{figures['speedup']:.3f} (interval {figures['interval'][0]:.3f}..{figures['interval'][1]:.3f})"
    )

    out_dir = Path(args.out_dir)
    files = evidence_names("perf", session.choice.kind, b.accuracy_dtype, session.mode, args.dataset)
    outputs_sha = harness.save_run_outputs(
        session,
        out_dir / files["outputs"],
        b.accuracy_dtype,
        args.dataset,
        opt_out,
        chosen_names,
        baseline_dtype=session.baseline_dtype_name,
    )
    profile = profile_forward(
        opt_fn, session.sync, session.choice.kind, out_dir / files["trace"], steps=args.profile_steps
    )
    traits = passes.model_traits(
        session.reference, session.choice.kind, session.spec.task_family, session.baseline_dtype_name
    )
    batch = {"generation": 1, "encoder_generation": 1, "batch_sweep": session.workload.headline_batch}.get(
        session.workload.name, session.spec.recipe.batch_size
    )
    metrics = {
        **harness.record_header(METRICS_SCHEMA, session.spec),
        "run": {
            **harness.run_record(session, args.device, b.accuracy_dtype, args.dataset, args.num_samples),
            "optimized": True,
        },
        "optimization": {
            "passes": list(chosen_names),
            "baseline_dtype": session.baseline_dtype_name,
            "paired": {k: v for k, v in figures.items() if not k.endswith("_samples_ms")},
            "cold_start": {"build_s": build_s},
            "runtime_only": not any(p.changes_code for p in chosen),
            "reference_timing_is": "the un-optimized baseline, measured in the same interleaved pairs",
            "workload": session.workload.name,
            "timed": session.workload.name + " headline call",
            "generation_accuracy": generation,
        },
        "timing": timing,
        "reference_timing": reference_timing,
        "profiler_during_timing": False,
        "throughput": {"batch_size": batch, "samples_per_s": throughput(batch, timing["median_ms"])},
        "peak_memory_bytes": ab_device.peak_memory(session.choice)
        if session.choice.kind != "cpu"
        else ab_device.host_peak_rss(),
        "peak_memory_source": "device_allocator" if session.choice.kind != "cpu" else "host_peak_rss",
        "accuracy": accuracy,
        "environment": environment(session, traits),
        "profile": profile,
        "workload": workload,
        "evidence": {"outputs": files["outputs"], "trace": files["trace"], "outputs_sha256": outputs_sha},
    }
    harness.write_json(out_dir / files["metrics"], metrics)
    harness.say(f"evidence: {files['metrics']}, {files['outputs']}, {files['trace']}")
    verdict = (
        "pass" if accuracy["verdict"] == "pass" and (generation is None or generation["verdict"] == "pass") else "fail"
    )
    return _result(session, b.accuracy_dtype, chosen_names, verdict, figures, files, workload), figures


def _session_for(args: argparse.Namespace, chosen: list[passes.Pass]) -> harness.Session:
    """The session the chosen passes run in; HarnessError when one was chosen for another device."""
    passes.cpu_bf16_override()  # a bad ASCENDBRIDGE_CPU_BF16 fails before any evidence is written
    session = harness.open_session(
        Path(args.spec), args.device, args.use_pretrained, args.num_samples, workload=args.workload
    )
    wrong = [p.name for p in chosen if p.device != session.choice.kind]
    if wrong:
        raise harness.HarnessError(
            f"pass(es) {', '.join(wrong)} were chosen for another device than {session.choice.kind}"
        )
    names = ", ".join(p.name for p in chosen) or "(none: baseline)"
    harness.say(f"model {session.spec.model_id}: passes {names} on {session.choice.kind}")
    return session


def _greedy_tokens(
    session: harness.Session, opt_fn: Callable[[], Any], workload: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The optimized model's greedy tokens against the float32 reference's (a generation workload's
    match rate, first divergence and verdict); None for a workload that generates nothing."""
    if workload is None or workload.get("reference_tokens") is None:
        return None
    with torch.inference_mode():
        generation = generation_accuracy(session, opt_fn(), workload["reference_tokens"])
    harness.say(
        f"greedy tokens vs the float32 reference: match {generation['match_rate']:.3f}, first divergence "
        f"{generation['first_divergence']}: {generation['verdict']}"
    )
    return generation


def _result(
    session: harness.Session,
    dtype: str,
    chosen_names: list[str],
    verdict: str,
    figures: dict[str, Any],
    files: dict[str, str],
    workload: dict[str, Any] | None,
) -> dict[str, Any]:
    """The perf run's RESULT: the verdict, the paired speedup and where its evidence is."""
    return {
        "ok": True,
        "verdict": verdict,
        "device": session.choice.kind,
        "dtype": dtype,
        "mode": session.mode,
        "passes": list(chosen_names),
        "speedup": figures["speedup"],
        "baseline_median_ms": figures["baseline_median_ms"],
        "optimized_median_ms": figures["candidate_median_ms"],
        "interval": figures["interval"],
        "metrics": files["metrics"],
        "outputs": files["outputs"],
        "trace": files["trace"],
        "workload": session.workload.name,
        "workload_figures": workload["headline"] if workload else None,
        "error": None,
    }


def main(argv: list[str], chosen_names: list[str]) -> int:
    """Exit 0: evidence written, accuracy passed; 2: written, accuracy failed; 1: the run failed."""
    return run_main(
        lambda: run(parse_args(argv), chosen_names),
        lambda result: 0 if result["verdict"] == "pass" else 2,
        failures=(harness.HarnessError, RuntimeDiagnosis, ValueError),
    )
