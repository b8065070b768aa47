"""The measured-results section the benchmark stage writes into an adaptation's README."""

from __future__ import annotations

from typing import Any


def workload_line(result: dict[str, Any]) -> str:
    """One line of a run's workload headline (generation or batch sweep); empty when there is none."""
    w = result.get("workload_figures") or {}
    where = f"{result['device']} {result['dtype']}"
    if isinstance(w.get("tpot_ms"), (int, float)):
        return (
            f"\nWorkload {result.get('workload')} ({where}): TTFT {w['ttft_ms']:.3f} ms, TPOT {w['tpot_ms']:.3f} ms, "
            f"{w['tokens_per_s']:.1f} tokens/s at batch 1, {w['batch_tokens_per_s']:.1f} tokens/s at batch {w['batch']}."
        )
    if isinstance(w.get("throughput_samples_per_s"), (int, float)):
        return (
            f"\nWorkload {result.get('workload')} ({where}): best throughput "
            f"{w['throughput_samples_per_s']:.1f} samples/s, {w['knee_samples_per_s']:.1f} samples/s at the knee."
        )
    return ""


def results_markdown(runs: list[dict[str, Any]]) -> str:
    """A table of accuracy_run RESULTs plus how to read and re-check the evidence."""
    lines = [
        "Benchmark (accuracy_run.py; reference: CPU float32, same seeded inputs, same warmup):",
        "",
        "| device | dtype | mode | median ms | p90 ms | reference median ms | samples/s | accuracy |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        rate = r.get("samples_per_s")
        lines.append(
            f"| {r['device']} ({r.get('device_name', '')}) | {r['dtype']} | {r['mode']} | {r['median_ms']:.3f} | "
            f"{r['p90_ms']:.3f} | {r['reference_median_ms']:.3f} | {rate:.1f} | {r['verdict']} |"
            if isinstance(rate, (int, float))
            else f"| {r['device']} | {r['dtype']} | {r['mode']} | {r['median_ms']:.3f} | {r['p90_ms']:.3f} | "
            f"{r['reference_median_ms']:.3f} | - | {r['verdict']} |"
        )
    lines += [line for line in map(workload_line, runs) if line]
    lines += [
        "",
        "Evidence per run: `benchmark_metrics_<device>_<dtype>_<mode>_<dataset>.json` (latency, memory,",
        "per-output cosine / max abs / max rel error / RMSE vs the float64 reference, thresholds used),",
        "`outputs_*.pt` (the tensors compared) and `trace_*.json` (open in https://ui.perfetto.dev).",
        "Re-check: `uv run benchmark/scripts/check_accuracy_run.py --adapt <name>` in the AscendBridge repo.",
    ]
    return "\n".join(lines)
