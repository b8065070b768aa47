"""Statistics of paired, interleaved A/B timings: speedup, its spread, and the keep decision.

Pure Python (no torch) so the framework's notes checker can load this same file by path and
recompute every figure the optimizer reported. One "pair" is a block of timed calls of A and a
block of B timed call by call in alternation (A B B A ...), so both see the same load. A block's
figure is its FASTEST call: on a shared machine preemption and thread-barrier stalls only ever
add time (we measured single calls of a 3 ms model taking up to 1 s under load), so the minimum
is the stable estimate of a call's cost, as in `timeit`. The pair's speedup is
best(A block) / best(B block); the reported medians are the medians of the block figures and the
speedup is their ratio. The interval is the distribution-free sign-test confidence interval for
the median pair speedup, so a "gain" has to show up in nearly every pair, not just on average.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

CONFIDENCE = 0.90  # two-sided coverage of the sign-test interval (at least this much)
DEFAULT_MIN_GAIN = 0.02  # a kept pass must be faster by more than 2 % at the interval's low end


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100), same definition as numpy's default and vLLM's.
    No values have no percentile: ValueError, so a caller decides what an empty list shows."""
    if not values:
        raise ValueError("percentile of no values")
    data = sorted(values)
    pos = (len(data) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def geomean(values: Sequence[float]) -> float | None:
    """Geometric mean of ratios (speedups); None for no values, ValueError for one that is not > 0
    (a ratio of zero or below is a broken figure, not one to average away)."""
    if not values:
        return None
    if any(not v > 0 for v in values):
        raise ValueError(f"geometric mean of a value that is not > 0: {min(values)}")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def sign_interval_rank(n: int, confidence: float = CONFIDENCE) -> int:
    """1-based order-statistic rank k so that [x_(k), x_(n-k+1)] covers the median with >= confidence.

    With few pairs no rank reaches the coverage; k = 1 (min..max) is then the widest honest choice.
    """
    alpha_half = (1.0 - confidence) / 2.0
    best = 1
    for k in range(1, n // 2 + 1):
        tail = sum(math.comb(n, i) for i in range(k)) / 2.0**n  # P(Binomial(n, 1/2) < k)
        if tail <= alpha_half:
            best = k
        else:
            break
    return best


@dataclass
class PairedResult:
    """Figures of one paired comparison; `speedup` = baseline_median_ms / candidate_median_ms."""

    pairs: int
    warmup: int
    iters_per_block: int
    baseline_median_ms: float  # median over pairs of each baseline block's fastest call
    candidate_median_ms: float
    speedup: float
    pair_speedups: list[float]
    interval: list[float]  # [low, high] sign-test interval of the median pair speedup
    confidence: float
    baseline_noise: float  # (max - min) / median of the baseline block figures
    baseline_samples_ms: list[float]
    candidate_samples_ms: list[float]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize_pairs(
    baseline_blocks: Sequence[Sequence[float]], candidate_blocks: Sequence[Sequence[float]], warmup: int
) -> PairedResult:
    """Figures from per-pair blocks of latencies (ms); both lists hold one block per pair."""
    if len(baseline_blocks) != len(candidate_blocks) or not baseline_blocks:
        raise ValueError("need the same number (>= 1) of baseline and candidate blocks")
    if any(not b for b in baseline_blocks) or any(not c for c in candidate_blocks):
        raise ValueError("empty timing block")
    base_fig = [min(b) for b in baseline_blocks]
    cand_fig = [min(c) for c in candidate_blocks]
    pair_speedups = [b / c for b, c in zip(base_fig, cand_fig)]
    base_med, cand_med = statistics.median(base_fig), statistics.median(cand_fig)
    k = sign_interval_rank(len(pair_speedups))
    ordered = sorted(pair_speedups)
    return PairedResult(
        pairs=len(pair_speedups),
        warmup=warmup,
        iters_per_block=len(baseline_blocks[0]),
        baseline_median_ms=base_med,
        candidate_median_ms=cand_med,
        speedup=base_med / cand_med,
        pair_speedups=pair_speedups,
        interval=[ordered[k - 1], ordered[len(ordered) - k]],
        confidence=CONFIDENCE,
        baseline_noise=(max(base_fig) - min(base_fig)) / base_med,
        baseline_samples_ms=[x for b in baseline_blocks for x in b],
        candidate_samples_ms=[x for c in candidate_blocks for x in c],
    )


def gain_decision(
    result: dict[str, Any], accuracy_verdict: str, min_gain: float = DEFAULT_MIN_GAIN
) -> tuple[bool, str]:
    """(keep, reason): keep only when accuracy holds and the whole interval is above 1 + min_gain."""
    low, high = result["interval"]
    if accuracy_verdict != "pass":
        return False, "accuracy failed against the baseline outputs"
    if low <= 1.0 + min_gain:
        if high < 1.0:
            return False, f"slower: pair speedups {low:.3f}..{high:.3f} all below 1"
        return False, (
            f"no gain beyond noise: pair-speedup interval {low:.3f}..{high:.3f} does not clear 1 + {min_gain:g}"
        )
    return True, f"faster beyond noise: x{result['speedup']:.3f}, interval {low:.3f}..{high:.3f}"


def confirmed_final(
    selection: dict[str, Any],
    confirmation: dict[str, Any] | None,
    kinds: dict[str, str],
    min_gain: float = DEFAULT_MIN_GAIN,
) -> dict[str, Any]:
    """The reported result: the search's selection only as far as a FRESH paired run confirms it.

    The selection is the best of many noisy measurements, so its own figure is biased upwards
    (winner's curse); the confirmation is an independent measurement of baseline vs the selected
    configuration. Kept only when the confirmation's interval clears 1 + min_gain; otherwise the
    outcome is `no_gain` with the baseline kept (an honest, completed result). Environment
    settings (thread counts, task queue, JIT mode) are listed apart from model changes.
    """
    chosen = list(selection.get("passes") or [])
    if not chosen:
        return {
            "passes": [],
            "outcome": "no_gain",
            "speedup": 1.0,
            "selection_speedup": None,
            "reason": selection.get("reason") or "no pass was faster beyond the measured noise",
            "environment_settings": [],
            "model_changes": [],
        }
    if not confirmation:
        raise ValueError("a selection with passes needs a confirmation run")
    keep, why = gain_decision(confirmation, (selection.get("accuracy") or {}).get("verdict", "fail"), min_gain)
    if not keep:
        return {
            "passes": [],
            "outcome": "no_gain",
            "speedup": 1.0,
            "selection_speedup": selection.get("speedup"),
            "confirmed_speedup": confirmation["speedup"],
            "confirmed_interval": confirmation["interval"],
            "rejected": chosen,
            "environment_settings": [],
            "model_changes": [],
            "reason": (
                f"the confirmation run did not reproduce the search's x{selection.get('speedup', 0):.3f} "
                f"for {'+'.join(chosen)}: {why}; baseline kept"
            ),
        }
    return {
        "passes": chosen,
        "outcome": "gain",
        "speedup": confirmation["speedup"],
        "interval": confirmation["interval"],
        "confidence": confirmation["confidence"],
        "pairs": confirmation["pairs"],
        "baseline_median_ms": confirmation["baseline_median_ms"],
        "optimized_median_ms": confirmation["candidate_median_ms"],
        "selection_speedup": selection.get("speedup"),
        "accuracy": selection.get("accuracy"),
        "cold_start": selection.get("cold_start"),
        "reason": f"confirmed by a fresh paired run: {why}",
        "environment_settings": [n for n in chosen if kinds.get(n) == "environment"],
        "model_changes": [n for n in chosen if kinds.get(n) != "environment"],
    }
