"""Completeness and internal consistency of one benchmark metrics file (no torch).

These are the checks that need no tensors: every required figure present, latencies positive and
ordered, iteration and warmup counts recorded and matching the raw samples (and a sized timing's
record, never under its floor: ab_runtime/sizing.py), the profiler off
while timing, the calibration probe's block (ab_runtime/calibration.py) re-derived from its samples
and paired one call for one with the timed calls. Recomputing the accuracy figures from the saved outputs is the other half of the
gate (ascendbridge/gatekit/inner/recompute_accuracy.py, run in the adaptation's interpreter).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from ab_runtime.calibration import check_block
from ab_runtime.pairstats import percentile
from ab_runtime.sizing import check_record
from ascendbridge.gatekit.compare import recorded_matches
from ascendbridge.gatekit.workload_check import check_workload

REQUIRED_RUN_KEYS = ("device", "device_name", "dtype", "mode", "dataset", "num_samples")
REQUIRED_ENV_KEYS = ("torch", "transformers", "torch_npu", "python")
TIMING_KEYS = ("median_ms", "p90_ms", "min_ms", "iterations", "warmup", "samples_ms")


def _num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_timing(name: str, timing: Any) -> list[str]:
    """Problems with one timing block (target or reference)."""
    if not isinstance(timing, dict):
        return [f"{name}: missing"]
    problems = [f"{name}.{k}: missing" for k in TIMING_KEYS if k not in timing]
    if problems:
        return problems
    samples = timing["samples_ms"]
    if not isinstance(samples, list) or not samples or not all(_num(s) and s > 0 for s in samples):
        return [f"{name}.samples_ms: must be a non-empty list of positive latencies"]
    for key in ("median_ms", "p90_ms", "min_ms"):
        if not _num(timing[key]) or timing[key] <= 0:
            problems.append(f"{name}.{key}: must be a positive number")
    if not isinstance(timing["iterations"], int) or timing["iterations"] < 1:
        problems.append(f"{name}.iterations: must be an integer >= 1")
    elif timing["iterations"] != len(samples):
        problems.append(f"{name}.iterations {timing['iterations']} != {len(samples)} samples recorded")
    if not isinstance(timing["warmup"], int) or timing["warmup"] < 0:
        problems.append(f"{name}.warmup: must be an integer >= 0")
    if problems:
        return problems
    if not timing["min_ms"] <= timing["median_ms"] <= timing["p90_ms"]:
        problems.append(
            f"{name}: expected min <= median <= p90, got "
            f"{timing['min_ms']} / {timing['median_ms']} / {timing['p90_ms']}"
        )
    if not recorded_matches(timing["median_ms"], statistics.median(samples)):
        problems.append(f"{name}.median_ms does not match its samples")
    if not recorded_matches(timing["p90_ms"], percentile(samples, 90)):
        problems.append(f"{name}.p90_ms does not match its samples")
    if not recorded_matches(timing["min_ms"], min(samples)):
        problems.append(f"{name}.min_ms does not match its samples")
    if timing.get("profiler_during_timing") is not False:
        problems.append(f"{name}: profiler_during_timing must be recorded as false")
    if "sizing" in timing:
        problems += check_record(f"{name}.sizing", timing["sizing"], timing["iterations"], timing["warmup"])
    return problems


def check_metrics(metrics: dict[str, Any]) -> list[str]:
    """All problems found in one metrics file; empty means complete and consistent."""
    problems: list[str] = []
    run = metrics.get("run")
    if not isinstance(run, dict):
        return ["run: missing"]
    problems += [f"run.{k}: missing" for k in REQUIRED_RUN_KEYS if run.get(k) in (None, "")]
    env = metrics.get("environment")
    if not isinstance(env, dict):
        problems.append("environment: missing")
    else:
        problems += [f"environment.{k}: missing" for k in REQUIRED_ENV_KEYS if k not in env]
    problems += check_timing("timing", metrics.get("timing"))
    problems += check_timing("reference_timing", metrics.get("reference_timing"))
    if "calibration" in metrics:  # absent in evidence written before the probe existed
        timed = metrics["timing"] if isinstance(metrics.get("timing"), dict) else {}
        problems += check_block("calibration", metrics["calibration"], timed.get("samples_ms"), timed.get("warmup"))
    if metrics.get("profiler_during_timing") is not False:
        problems.append("profiler_during_timing must be false")
    for a, b in (("timing", "reference_timing"),):
        ta, tb = metrics.get(a) or {}, metrics.get(b) or {}
        if isinstance(ta, dict) and isinstance(tb, dict) and ta.get("warmup") != tb.get("warmup"):
            problems.append(
                f"warmup differs between {a} ({ta.get('warmup')}) and {b} ({tb.get('warmup')}): "
                "warmup must be symmetric"
            )
    tp = metrics.get("throughput")
    timing = got if isinstance(got := metrics.get("timing"), dict) else {}
    if not isinstance(tp, dict) or not _num(tp.get("samples_per_s")) or tp["samples_per_s"] <= 0:
        problems.append("throughput.samples_per_s: must be a positive number")
    elif _num(timing.get("median_ms")) and _num(tp.get("batch_size")):
        expected = tp["batch_size"] / (timing["median_ms"] / 1000.0)
        if not recorded_matches(tp["samples_per_s"], expected):
            problems.append("throughput.samples_per_s does not match batch_size / median latency")
    mem = metrics.get("peak_memory_bytes", "missing")
    if mem == "missing" or not (mem is None or (isinstance(mem, int) and mem >= 0)):
        problems.append("peak_memory_bytes: must be recorded (bytes, or null where the device has no counter)")
    acc = metrics.get("accuracy")
    if not isinstance(acc, dict) or acc.get("verdict") not in ("pass", "fail"):
        problems.append("accuracy.verdict: missing")
    elif not isinstance(acc.get("thresholds"), dict) or not isinstance(acc.get("outputs"), dict):
        problems.append("accuracy: thresholds and per-output figures must be recorded")
    else:
        for name, out in acc["outputs"].items():
            if out.get("kind") == "float" and out.get("verdict") == "pass":
                missing = [
                    k for k in ("cosine", "max_abs_err", "max_rel_err", "rmse") if k not in out.get("metrics", {})
                ]
                if missing:
                    problems.append(f"accuracy.outputs.{name}: missing {', '.join(missing)}")
    ev = metrics.get("evidence")
    if not isinstance(ev, dict) or not all(isinstance(ev.get(k), str) for k in ("outputs", "trace", "outputs_sha256")):
        problems.append("evidence: outputs, trace and outputs_sha256 must be named")
    return problems + check_workload(metrics)
