"""Workload profiles and their figures as pure functions of raw samples (standard library only).

The runtime computes its figures with these and the benchmark gate (ascendbridge/gatekit/workload_check.py,
framework side, no torch) recomputes them with the same functions from the recorded samples, so a
figure that does not follow from its samples fails the gate.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Any

from .errors import SpecError
from .pairstats import percentile

KNEE_FRACTION = 0.9  # the knee: the smallest batch reaching this share of the best throughput
WORKLOADS = ("generation", "encoder_generation", "batch_sweep", "forward")
GENERATION_FAMILIES = ("causal_lm",)
ENCODER_DECODER_FAMILIES = ("seq2seq", "speech_seq2seq", "vision_seq2seq")


@dataclass(frozen=True)
class Workload:
    """A named profile and its sizes; the spec's `workload` section overrides any field."""

    name: str
    prompt_len: int = 32
    new_tokens: int = 16
    batch: int = 4  # the larger generation batch (batch 1 is always measured)
    sweep: tuple[int, ...] = (1, 8, 32)
    headline_batch: int = 8  # encoders: the batch the optimizer's headline throughput is timed at

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "sweep": list(self.sweep)}


def family_default(family: str) -> str:
    if family in GENERATION_FAMILIES:
        return "generation"
    if family in ENCODER_DECODER_FAMILIES:
        return "encoder_generation"
    return "batch_sweep"


def resolve(family: str, section: dict[str, Any] | None, override: str | None = None) -> Workload:
    """The workload of a model: `override` (the team lead's benchmark.workload) or the spec's
    `workload.name` or the family's default, with the spec's sizes; SpecError names a bad field."""
    section = dict(section or {})
    name = override or section.pop("name", None) or family_default(family)
    section.pop("name", None)
    if name not in WORKLOADS:
        raise SpecError(f"workload '{name}' is unknown (choices: {', '.join(WORKLOADS)})")
    if name in ("generation", "encoder_generation") and family not in GENERATION_FAMILIES + ENCODER_DECODER_FAMILIES:
        raise SpecError(f"workload '{name}' needs a generating family (causal_lm or an encoder-decoder), not {family}")
    if name in ("generation", "encoder_generation"):  # the family decides whether there is an encoder
        name = "encoder_generation" if family in ENCODER_DECODER_FAMILIES else "generation"
    unknown = sorted(set(section) - {f.name for f in dataclasses.fields(Workload)})
    if unknown:
        raise SpecError(f"spec field 'workload' has unknown key(s): {', '.join(unknown)}")
    if "sweep" in section:
        section["sweep"] = tuple(section["sweep"])
    workload = Workload(name, **section)
    for key in ("prompt_len", "new_tokens", "batch", "headline_batch"):
        if not isinstance(getattr(workload, key), int) or getattr(workload, key) < 1:
            raise SpecError(f"spec field 'workload.{key}' must be a positive integer")
    if workload.new_tokens < 2:
        raise SpecError("spec field 'workload.new_tokens' must be >= 2 (TPOT needs a decode step)")
    if not workload.sweep or any(not isinstance(b, int) or b < 1 for b in workload.sweep):
        raise SpecError("spec field 'workload.sweep' must be a list of positive integers")
    return workload


def stats(samples_ms: list[float]) -> dict[str, float]:
    """Median, p90, fastest and spread (stdev) of positive latencies."""
    return {
        "median_ms": statistics.median(samples_ms),
        "p90_ms": percentile(samples_ms, 90),
        "min_ms": min(samples_ms),
        "stdev_ms": statistics.stdev(samples_ms) if len(samples_ms) > 1 else 0.0,
    }


GENERATION_PAIRED_WITH = "decode_steps_ms (the fastest step of each generation)"


def fastest_steps(decode_steps_ms: list[list[float]]) -> list[float]:
    """The fastest decode step of each generation: what a generation's calibration is paired with."""
    return [min(steps) for steps in decode_steps_ms]


def divergence(target: list[int], reference: list[int]) -> dict[str, Any]:
    """Token-by-token agreement of two greedy sequences: match rate and the first differing index
    (None when they agree everywhere); a length difference counts as divergence at the shorter end."""
    n = max(len(target), len(reference))
    first = next((i for i in range(n) if i >= len(target) or i >= len(reference) or target[i] != reference[i]), None)
    matches = sum(1 for a, b in zip(target, reference) if a == b)
    return {"match_rate": matches / n if n else 1.0, "first_divergence": first, "compared": n}


def knee(points: list[dict[str, Any]], fraction: float = KNEE_FRACTION) -> int | None:
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
