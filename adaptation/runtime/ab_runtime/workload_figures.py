"""The workload figures as pure functions of raw samples (standard library only).

The runtime computes its figures with these and the benchmark gate (benchmark/metrics_check.py,
framework side, no torch) recomputes them with the same functions from the recorded samples, so a
figure that does not follow from its samples fails the gate.
"""

from __future__ import annotations

import statistics
from typing import Any, Optional

from .pairstats import percentile

KNEE_FRACTION = 0.9  # the knee: the smallest batch reaching this share of the best throughput
STAT_KEYS = ("median_ms", "p90_ms", "min_ms", "stdev_ms")


def stats(samples_ms: list[float]) -> dict[str, float]:
    """Median, p90, fastest and spread (stdev) of positive latencies."""
    return {"median_ms": statistics.median(samples_ms), "p90_ms": percentile(samples_ms, 90),
            "min_ms": min(samples_ms), "stdev_ms": statistics.stdev(samples_ms) if len(samples_ms) > 1 else 0.0}


def divergence(target: list[int], reference: list[int]) -> dict[str, Any]:
    """Token-by-token agreement of two greedy sequences: match rate and the first differing index
    (None when they agree everywhere); a length difference counts as divergence at the shorter end."""
    n = max(len(target), len(reference))
    first = next((i for i in range(n) if i >= len(target) or i >= len(reference) or target[i] != reference[i]), None)
    matches = sum(1 for a, b in zip(target, reference) if a == b)
    return {"match_rate": matches / n if n else 1.0, "first_divergence": first, "compared": n}


def knee(points: list[dict[str, Any]], fraction: float = KNEE_FRACTION) -> Optional[int]:
    """The smallest batch whose throughput reaches `fraction` of the best measured throughput:
    past it, a larger batch buys little and costs latency and memory."""
    measured = [p for p in points if isinstance(p.get("samples_per_s"), (int, float))]
    if not measured:
        return None
    best = max(p["samples_per_s"] for p in measured)
    return min(p["batch"] for p in measured if p["samples_per_s"] >= fraction * best)


def tokens_per_s(batch: int, tpot_ms: float) -> float:
    """Decode throughput: every decode step yields one token for each of `batch` sequences."""
    return batch * 1000.0 / tpot_ms


def decode_bandwidth_gbs(bytes_per_step: int, tpot_ms: float) -> float:
    """Bytes read per decode step (weights + mean KV cache) over the time per step, in GB/s."""
    return bytes_per_step / (tpot_ms / 1000.0) / 1e9


def generation_figures(ttft_ms: list[float], steps_ms: list[list[float]], batch: int) -> dict[str, Any]:
    """TTFT and TPOT statistics from raw samples: TPOT per run is the mean decode step of that run."""
    tpot = stats([statistics.fmean(run) for run in steps_ms])
    return {"ttft_ms": stats(ttft_ms), "tpot_ms": tpot, "tokens_per_s": tokens_per_s(batch, tpot["median_ms"])}
