"""The operator acceptance standard: the framework's, like the accuracy standard (standard library).

A replacement (a fused operator, a decomposition, a swapped module, a custom operator) is accepted
only when it is run on at least MIN_SAMPLES samples (the shapes and dtypes the model uses, plus
non-contiguous and edge inputs: zeros, tiny and large magnitudes) and every sample, compared with
the ATen reference computed in float64 on the same inputs, keeps
- at least WITHIN_SHARE of its elements within atol + rtol * |reference| (CANN's operator standard:
  99 % of elements within tolerance),
- MERE (mean relative error) <= mere and MARE (max relative error) <= mare, where the relative
  error is |out - ref| / (|ref| + atol);
max abs error and RMSE are recorded with them. Thresholds per dtype the replacement computes in.
A replacement is never held to more than the computation it replaces achieves in the same dtype:
where the contract also runs that original (the baseline) and a sample misses the thresholds, the
sample still passes when the replacement is no worse than the baseline on the same inputs (MERE,
MARE and max abs error at most BASELINE_MARGIN times the baseline's, no fewer elements within
tolerance than the baseline less one point, non-finite only where the baseline is too): a bfloat16
MLP misses float64 by what bfloat16 costs, and a swap is judged on what it adds.
The ab_runtime.ops.acceptance module runs it; the framework writes it into every operator spec.
"""

from __future__ import annotations

from typing import Any

MIN_SAMPLES = 50
WITHIN_SHARE = 0.99
BASELINE_MARGIN = 1.5
REQUIRED_KINDS = ("non_contiguous", "zeros", "tiny", "large")  # edge inputs every run must include
THRESHOLDS: dict[str, dict[str, float]] = {
    "float32": {"atol": 1e-5, "rtol": 1e-4, "mere": 1e-4, "mare": 1e-2},
    "float16": {"atol": 1e-3, "rtol": 1e-3, "mere": 1e-3, "mare": 1e-1},
    "bfloat16": {"atol": 4e-3, "rtol": 8e-3, "mere": 8e-3, "mare": 2e-1},
}


def thresholds(dtype: str) -> dict[str, float]:
    if dtype not in THRESHOLDS:
        raise ValueError(f"no operator acceptance thresholds for dtype {dtype!r} (have: {', '.join(THRESHOLDS)})")
    return dict(THRESHOLDS[dtype])


def no_worse_than_baseline(sample: dict[str, Any], baseline: dict[str, Any]) -> bool:
    """The replacement's errors on this sample are within BASELINE_MARGIN of the original's."""
    slack = thresholds(str(sample["dtype"]))["atol"]
    return (
        all(sample[m] <= BASELINE_MARGIN * baseline[m] + slack for m in ("mere", "mare", "max_abs"))
        and sample["within_share"] >= baseline["within_share"] - 0.01
        and (sample.get("finite", True) or not baseline.get("finite", True))
    )


def sample_problems(sample: dict[str, Any]) -> list[str]:
    """Why one sample fails ([] when it passes): its dtype's thresholds, unless no worse than the
    baseline (module docstring)."""
    problems = threshold_problems(sample)
    baseline = sample.get("baseline")
    if problems and isinstance(baseline, dict) and no_worse_than_baseline(sample, baseline):
        return []
    if problems and isinstance(baseline, dict):
        problems.append(
            f"worse than the original in {sample['dtype']} (MERE {baseline['mere']:.3g}, "
            f"MARE {baseline['mare']:.3g}, max abs {baseline['max_abs']:.3g})"
        )
    return problems


def threshold_problems(sample: dict[str, Any]) -> list[str]:
    """Why one sample misses its dtype's thresholds ([] when it meets them)."""
    limit = thresholds(str(sample["dtype"]))
    problems = []
    if sample["within_share"] < WITHIN_SHARE:
        problems.append(f"{sample['within_share']:.2%} of elements within atol + rtol (< {WITHIN_SHARE:.0%})")
    if sample["mere"] > limit["mere"]:
        problems.append(f"MERE {sample['mere']:.3g} > {limit['mere']:g}")
    if sample["mare"] > limit["mare"]:
        problems.append(f"MARE {sample['mare']:.3g} > {limit['mare']:g}")
    if not sample.get("finite", True):
        problems.append("non-finite output where the reference is finite")
    return problems


def judge(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The verdict over a run's samples: accepted, or refused with every reason (first failing
    sample named)."""
    reasons = []
    if len(samples) < MIN_SAMPLES:
        reasons.append(f"{len(samples)} samples (< {MIN_SAMPLES})")
    kinds = {s.get("kind") for s in samples}
    missing = [k for k in REQUIRED_KINDS if k not in kinds]
    if missing:
        reasons.append(f"no {', '.join(missing)} inputs")
    failed = [(s, p) for s in samples if (p := sample_problems(s))]
    if failed:
        s, p = failed[0]
        reasons.append(
            f"{len(failed)} of {len(samples)} samples fail; first: sample {s['index']} ({s['kind']}, "
            f"{s['dtype']}, {s['shape']}): {'; '.join(p)}"
        )
    worst = max(samples, key=lambda s: s["max_abs"], default=None)
    return {
        "accepted": not reasons,
        "reasons": reasons,
        "samples": len(samples),
        "failed": len(failed),
        "max_abs": worst["max_abs"] if worst else None,
        "mere": max((s["mere"] for s in samples), default=None),
        "mare": max((s["mare"] for s in samples), default=None),
        "rmse": max((s["rmse"] for s in samples), default=None),
        "min_within_share": min((s["within_share"] for s in samples), default=None),
    }


def acceptance_file(op: str, shapes: list[str], dtypes: list[str]) -> dict[str, Any]:
    """The acceptance file of an operator spec: what its author's implementation must pass."""
    return {
        "operator": op,
        "min_samples": MIN_SAMPLES,
        "within_share": WITHIN_SHARE,
        "required_kinds": list(REQUIRED_KINDS),
        "shapes": shapes,
        "dtypes": dtypes,
        "thresholds": {d: THRESHOLDS[d] for d in dtypes if d in THRESHOLDS},
        "reference": f"torch.ops.aten.{op if '.' in op else op + '.default'} in float64 on CPU",
        "metrics": ["max_abs", "MERE", "MARE", "RMSE", "within_share"],
    }
