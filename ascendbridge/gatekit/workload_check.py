"""Re-derive a benchmark metrics file's workload figures from its raw samples (no torch).

Every TTFT / TPOT / encoder / sweep statistic, tokens/s, decode bandwidth, the knee of the batch
sweep, the greedy match rate and first divergence, the calibration blocks (ab_runtime/calibration.py)
and the headline figures are recomputed with the runtime's own pure functions
(ab_runtime/workload_figures.py) and must equal the recorded ones; a sized run's counts must match
its record and keep their floor (ab_runtime/sizing.py). The re-execution half (the
reference's greedy tokens regenerated, TPOT re-timed against the probe) runs in the adaptation's
interpreter (ascendbridge/gatekit/inner/reexecute.py).
"""

from __future__ import annotations

from typing import Any

from ab_runtime import workload_figures as wf
from ab_runtime.calibration import check_block
from ab_runtime.sizing import check_record
from ascendbridge.gatekit.compare import recorded_matches

GENERATION = ("generation", "encoder_generation")


def _positive_list(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in value)
    )


def _same(where: str, recorded: Any, recomputed: dict[str, Any]) -> list[str]:
    if not isinstance(recorded, dict):
        return [f"{where}: missing"]
    return [
        f"{where}.{k}: recorded {recorded.get(k)!r}, its samples give {v!r}"
        for k, v in recomputed.items()
        if not recorded_matches(recorded.get(k), v)
    ]


def _entries(body: dict[str, Any], key: str) -> list[tuple[str, Any]]:
    """(where, entry) for each entry of the workload's list `key`; empty when it is missing."""
    entries = body.get(key)
    return [(f"workload.{key}[{i}]", e) for i, e in enumerate(entries)] if isinstance(entries, list) else []


def check_generation(body: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    if not _entries(body, "runs"):
        return ["workload.runs: missing"]
    runs: list[dict[str, Any]] = body["runs"]
    for where, run in _entries(body, "runs"):
        ttft, steps = run.get("ttft_samples_ms"), run.get("decode_steps_ms")
        if not _positive_list(ttft) or not isinstance(steps, list) or not all(_positive_list(s) for s in steps):
            problems.append(f"{where}: ttft_samples_ms and decode_steps_ms must be positive latencies")
            continue
        if not len(ttft) == len(steps) == run.get("iterations"):
            problems.append(
                f"{where}: iterations {run.get('iterations')} != {len(ttft)} TTFT / {len(steps)} decode samples"
            )
        if any(len(s) != run.get("new_tokens", 0) - 1 for s in steps):
            problems.append(f"{where}: every run must time new_tokens - 1 decode steps")
        if "sizing" in run:
            problems += check_record(f"{where}.sizing", run["sizing"], run.get("iterations"), run.get("warmup"))
        if "calibration" in run:
            problems += check_block(
                f"{where}.calibration", run["calibration"], wf.fastest_steps(steps), run.get("warmup")
            )
        fig = wf.generation_figures(ttft, steps, int(run.get("batch", 0)))
        problems += _same(f"{where}.ttft_ms", run.get("ttft_ms"), fig["ttft_ms"])
        problems += _same(f"{where}.tpot_ms", run.get("tpot_ms"), fig["tpot_ms"])
        if not recorded_matches(run.get("tokens_per_s"), fig["tokens_per_s"]):
            problems.append(f"{where}.tokens_per_s does not equal batch / TPOT")
        if "encoder_samples_ms" in run:
            problems += _same(
                f"{where}.encoder_ms",
                run.get("encoder_ms"),
                wf.stats(run["encoder_samples_ms"]) if _positive_list(run["encoder_samples_ms"]) else {"median_ms": -1},
            )
        bytes_per_step = run.get("bytes_per_decode_step")
        if not isinstance(bytes_per_step, int) or bytes_per_step < run.get("weight_bytes", 0) or bytes_per_step <= 0:
            problems.append(f"{where}.bytes_per_decode_step: must be at least the weight bytes")
        elif not recorded_matches(
            run.get("decode_bandwidth_gbs"), wf.decode_bandwidth_gbs(bytes_per_step, fig["tpot_ms"]["median_ms"])
        ):
            problems.append(f"{where}.decode_bandwidth_gbs does not equal bytes per step / TPOT")
        if run.get("peak_memory_bytes") is not None and (
            not isinstance(run["peak_memory_bytes"], int) or run["peak_memory_bytes"] < run.get("kv_cache_bytes", 0)
        ):
            problems.append(f"{where}.peak_memory_bytes is below the KV cache it held")
    if problems:
        return problems
    first, last = runs[0], runs[-1]
    if first.get("batch") != 1:
        problems.append("workload.runs[0] must be the batch-1 run")
    reference = body.get("reference_tokens")
    tokens = first.get("tokens")
    if reference is not None:
        if not (isinstance(tokens, list) and tokens and isinstance(tokens[0], list)):
            problems.append("workload.runs[0].tokens: missing")
        else:
            again = wf.divergence(tokens[0], reference)
            recorded = body.get("greedy_vs_reference") or {}
            if any(recorded.get(k) != v and not recorded_matches(recorded.get(k), v) for k, v in again.items()):
                problems.append(
                    f"workload.greedy_vs_reference {recorded} does not follow from the recorded tokens ({again})"
                )
    headline = {
        "tpot_ms": first["tpot_ms"]["median_ms"],
        "tokens_per_s": first["tokens_per_s"],
        "ttft_ms": first["ttft_ms"]["median_ms"],
        "batch_tokens_per_s": last["tokens_per_s"],
        "batch": last["batch"],
        "decode_bandwidth_gbs": first["decode_bandwidth_gbs"],
        "peak_memory_bytes": max(r.get("peak_memory_bytes") or 0 for r in runs),
    }
    return problems + _same("workload.headline", body.get("headline"), headline)


def check_sweep(body: dict[str, Any]) -> list[str]:
    if not _entries(body, "points"):
        return ["workload.points: missing"]
    points: list[dict[str, Any]] = body["points"]
    problems: list[str] = []
    for where, p in _entries(body, "points"):
        if not _positive_list(p.get("samples_ms")) or not isinstance(p.get("batch"), int):
            problems.append(f"{where}: batch and samples_ms must be recorded")
            continue
        problems += _same(where, p, wf.stats(p["samples_ms"]))
        if "calibration" in p:
            problems += check_block(f"{where}.calibration", p["calibration"], p["samples_ms"], p.get("warmup"))
        if "sizing" in p:
            problems += check_record(f"{where}.sizing", p["sizing"], len(p["samples_ms"]), p.get("warmup"))
        if not recorded_matches(p.get("samples_per_s"), p["batch"] * 1000.0 / wf.stats(p["samples_ms"])["median_ms"]):
            problems.append(f"{where}.samples_per_s does not equal batch / median latency")
    if problems:
        return problems
    if body.get("knee_batch") != wf.knee(points, float(body.get("knee_fraction", wf.KNEE_FRACTION))):
        problems.append(
            f"workload.knee_batch {body.get('knee_batch')} is not the knee of the recorded sweep ({wf.knee(points)})"
        )
    at_knee = next((p for p in points if p["batch"] == body.get("knee_batch")), None)
    headline = {
        "batch1_latency_ms": points[0]["median_ms"] if points[0]["batch"] == 1 else None,
        "throughput_samples_per_s": max(p["samples_per_s"] for p in points),
        "knee_samples_per_s": at_knee["samples_per_s"] if at_knee else None,
        "peak_memory_bytes": max(p.get("peak_memory_bytes") or 0 for p in points),
    }
    return problems + _same("workload.headline", body.get("headline"), headline)


def check_workload(metrics: dict[str, Any]) -> list[str]:
    """Problems with the metrics file's `workload` block (None, for the forward workload, is fine)."""
    body = metrics.get("workload")
    if body is None:
        return []
    if not isinstance(body, dict) or not isinstance(body.get("workload"), dict):
        return ["workload: must be an object naming its profile"]
    if body.get("profiler_during_timing") is not False:
        return ["workload: profiler_during_timing must be recorded as false"]
    name = body["workload"].get("name")
    if name in GENERATION:
        return check_generation(body)
    if name == "batch_sweep":
        return check_sweep(body)
    return [f"workload: unknown profile {name!r}"]
