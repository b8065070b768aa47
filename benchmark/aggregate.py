"""Aggregate every adaptation's benchmark evidence into one report (JSON + CSV) and PNG figures.

Reads metrics JSON only (the framework has no torch). One row per evidence set; unreadable
files are listed as skipped with their reason rather than aborting the report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ab_runtime.metrics_file import EvidenceError, MetricsFile, metrics_glob, read_metrics
from ascendbridge.gatekit.summary import collect_rows, pyplot, save_figure, write_summary

WORKLOAD_COLUMNS = (
    "workload",
    "ttft_ms",
    "tpot_ms",
    "tpot_stdev_ms",
    "tokens_per_s",
    "batch_tokens_per_s",
    "decode_bandwidth_gbs",
    "first_divergence",
    "greedy_match_rate",
    "throughput_samples_per_s",
    "knee_batch",
    "workload_peak_memory_bytes",
)
COLUMNS = (
    "adaptation",
    "evidence_set",
    "model_id",
    "task_family",
    "device",
    "device_name",
    "dtype",
    "mode",
    "dataset",
    "median_ms",
    "p90_ms",
    "min_ms",
    "iterations",
    "warmup",
    "reference_median_ms",
    "speedup_vs_reference",
    "samples_per_s",
    "peak_memory_bytes",
    "accuracy",
    "min_cosine",
    "max_abs_err_scaled",
    "parameters",
    "layers_built",
    "layers_total",
    "depth_reduced",
    "proxy",
    *WORKLOAD_COLUMNS,
    "torch",
    "torch_npu",
    "created_at",
)


def workload_columns(body: Any) -> dict[str, Any]:
    """The workload's headline columns (None for the forward workload or older evidence)."""
    if not isinstance(body, dict):
        return dict.fromkeys(WORKLOAD_COLUMNS)
    head, name = body.get("headline") or {}, (body.get("workload") or {}).get("name")
    agree = body.get("greedy_vs_reference") or {}
    first = (body.get("runs") or [{}])[0]
    return {
        "workload": name,
        "ttft_ms": head.get("ttft_ms"),
        "tpot_ms": head.get("tpot_ms"),
        "tpot_stdev_ms": (first.get("tpot_ms") or {}).get("stdev_ms"),
        "tokens_per_s": head.get("tokens_per_s"),
        "batch_tokens_per_s": head.get("batch_tokens_per_s"),
        "decode_bandwidth_gbs": head.get("decode_bandwidth_gbs"),
        "first_divergence": agree.get("first_divergence"),
        "greedy_match_rate": agree.get("match_rate"),
        "throughput_samples_per_s": head.get("throughput_samples_per_s"),
        "knee_batch": body.get("knee_batch"),
        "workload_peak_memory_bytes": head.get("peak_memory_bytes"),
    }


def row(evidence: MetricsFile) -> dict[str, Any]:
    """One metrics file's figures; `evidence_set` names its run (device/dtype/mode/dataset)."""
    metrics, run, timing = evidence.data, evidence.run, evidence.data["timing"]
    outputs = evidence.outputs.values()
    floats = [o["metrics"] for o in outputs if o.get("kind") == "float" and "cosine" in o.get("metrics", {})]
    model = metrics.get("model") or {}
    return {
        "adaptation": metrics.get("adaptation"),
        "evidence_set": evidence.label,
        "model_id": metrics.get("model_id"),
        "task_family": metrics.get("task_family"),
        "device": run.device,
        "device_name": run.device_name,
        "dtype": run.dtype,
        "mode": run.mode,
        "dataset": run.dataset,
        "median_ms": evidence.median_ms,
        "p90_ms": evidence.p90_ms,
        "min_ms": evidence.min_ms,
        "iterations": timing["iterations"],
        "warmup": timing["warmup"],
        "reference_median_ms": evidence.reference_median_ms,
        "speedup_vs_reference": evidence.reference_median_ms / evidence.median_ms,
        "samples_per_s": evidence.samples_per_s,
        "peak_memory_bytes": metrics.get("peak_memory_bytes"),
        "accuracy": evidence.verdict,
        "min_cosine": min((f["cosine"] for f in floats), default=None),
        "max_abs_err_scaled": max((f["max_abs_err_scaled"] for f in floats), default=None),
        "parameters": model.get("parameters"),
        "layers_built": model.get("layers_built"),
        "layers_total": model.get("layers_total"),
        "depth_reduced": model.get("depth_reduced"),
        "proxy": evidence.proxy,  # `proxy: N of M layers`: a registered reduced-depth proxy's figures
        **workload_columns(metrics.get("workload")),
        "torch": metrics["environment"].get("torch"),
        "torch_npu": metrics["environment"].get("torch_npu"),
        "created_at": metrics.get("created_at"),
    }


def collect(adaptations_root: Path) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    return collect_rows(
        adaptations_root,
        f"*/{metrics_glob('benchmark')}",
        lambda path: [row(read_metrics(path))],
        (EvidenceError, KeyError, TypeError, ZeroDivisionError),
    )


def write_reports(rows: list[dict[str, Any]], skipped: list[dict[str, str]], out_dir: Path) -> list[Path]:
    return write_summary(rows, skipped, out_dir, "benchmark_summary", "runs", COLUMNS)


def write_figures(rows: list[dict[str, Any]], out_dir: Path) -> list[Path]:
    """Latency (median with p90 whisker) and worst cosine per run, as PNG."""
    plt = pyplot()

    out_dir.mkdir(parents=True, exist_ok=True)
    if not rows:
        return []
    labels = [f"{r['adaptation']}\n{r['evidence_set']}" for r in rows]
    height = max(3.0, 0.45 * len(rows) + 1.5)
    paths = []
    fig, ax = plt.subplots(figsize=(9, height))
    medians = [r["median_ms"] for r in rows]
    spread = [max(r["p90_ms"] - r["median_ms"], 0.0) for r in rows]
    ax.barh(labels, medians, xerr=[[0] * len(rows), spread], color="#4c72b0")
    ax.set_xlabel("latency per forward, ms (median; whisker to p90)")
    ax.set_title("AscendBridge benchmark: latency")
    paths.append(save_figure(fig, out_dir / "latency.png"))
    fig, ax = plt.subplots(figsize=(9, height))
    cosines = [r["min_cosine"] if r["min_cosine"] is not None else 0.0 for r in rows]
    colors = ["#55a868" if r["accuracy"] == "pass" else "#c44e52" for r in rows]
    ax.barh(labels, [1.0 - c for c in cosines], color=colors)
    ax.set_xscale("symlog", linthresh=1e-7)
    ax.set_xlabel("1 - worst cosine vs CPU fp32 reference (green: accuracy pass, red: fail)")
    ax.set_title("AscendBridge benchmark: accuracy")
    paths.append(save_figure(fig, out_dir / "accuracy.png"))
    return paths
