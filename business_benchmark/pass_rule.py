"""The business benchmark's pass rule: framework-owned, stated in every evidence file.

A target passes an evaluation when
- every task score (real weights only) is within a relative tolerance of the reference's
  score on the same items: |target - reference| <= rtol x |reference|, rtol 0.05 by default
  (vllm-ascend's lm-eval CI checks its task metrics with rtol 0.05; optimum-habana asks >= 0.99x);
- every agreement metric (target vs reference, always) clears its floor (or stays under its
  ceiling, or inside its band).
A run may tighten the rule (smaller rtol, higher floors); the gate applies the stricter of the
recorded rule and this one, so an edited evidence file cannot loosen it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from business_benchmark.metrics import LOWER_IS_BETTER

RELATIVE_TOLERANCE = 0.05
# metric -> (kind, bound): "min" = value >= bound, "max" = value <= bound, "band" = |value - 1| <= bound
AGREEMENT_BOUNDS: dict[str, tuple[str, float]] = {
    "embedding_cosine_mean": ("min", 0.99),
    "retrieval_top1_agreement": ("min", 0.9),
    "similarity_spearman_agreement": ("min", 0.95),
    "label_agreement": ("min", 0.9),
    "top1_agreement": ("min", 0.9),
    "answer_exact_agreement": ("min", 0.8),
    "token_match_rate": ("min", 0.5),
    "perplexity_ratio": ("band", 0.05),
    "chrf_vs_reference": ("min", 50.0),
    "wer_vs_reference": ("max", 0.5),
    # agreement-only families (seeded inputs, no gold): the family's accuracy outputs
    "output_cosine_min": ("min", 0.99),
    "output_argmax_agreement": ("min", 0.8),
}


@dataclass(frozen=True)
class PassRule:
    relative_tolerance: float = RELATIVE_TOLERANCE
    bounds: dict[str, tuple[str, float]] = field(default_factory=lambda: dict(AGREEMENT_BOUNDS))

    def as_dict(self) -> dict[str, Any]:
        return {
            "relative_tolerance": self.relative_tolerance,
            "agreement_bounds": {k: {"kind": kind, "bound": b} for k, (kind, b) in sorted(self.bounds.items())},
            "statement": "task score: |target - reference| <= relative_tolerance x |reference| (real weights "
            "only); agreement: min = value >= bound, max = value <= bound, band = |value - 1| <= bound",
        }

    @classmethod
    def tightened(cls, rtol: float | None = None, bounds: dict[str, float] | None = None) -> PassRule:
        """The framework rule, made stricter where asked; a looser request is refused."""
        rule = cls()
        if rtol is not None:
            if not 0 <= rtol <= rule.relative_tolerance:
                raise ValueError(f"business rtol {rtol} would loosen the framework's {rule.relative_tolerance}")
            rule = cls(rtol, dict(rule.bounds))
        for name, value in (bounds or {}).items():
            if name not in rule.bounds:
                raise ValueError(f"unknown agreement metric '{name}' (known: {', '.join(sorted(rule.bounds))})")
            kind, base = rule.bounds[name]
            if (kind == "min" and value < base) or (kind != "min" and value > base):
                raise ValueError(f"bound {value} for {name} would loosen the framework's {base}")
            rule.bounds[name] = (kind, float(value))
        return rule

    @classmethod
    def from_record(cls, recorded: Any) -> tuple[PassRule, list[str]]:
        """The stricter of a recorded rule and the framework's, with notes on what was ignored."""
        notes: list[str] = []
        base = cls()
        if not isinstance(recorded, dict):
            return base, ["evidence states no pass rule: the framework's rule applies"]
        rtol = recorded.get("relative_tolerance")
        rtol = rtol if isinstance(rtol, (int, float)) and rtol <= base.relative_tolerance else base.relative_tolerance
        bounds = dict(base.bounds)
        for name, entry in (recorded.get("agreement_bounds") or {}).items():
            if name not in bounds or not isinstance(entry, dict) or not isinstance(entry.get("bound"), (int, float)):
                continue
            kind, b = bounds[name]
            value = float(entry["bound"])
            if (kind == "min" and value > b) or (kind != "min" and value < b):
                bounds[name] = (kind, value)
            elif value != b:
                notes.append(f"recorded bound {value} for {name} is looser than the framework's {b}: ignored")
        return cls(float(rtol), bounds), notes


def checks(result: dict[str, Any], rule: PassRule) -> list[dict[str, Any]]:
    """One check per task score and per bounded agreement metric of an evaluation's metrics."""
    out = []
    for name, pair in sorted(result.get("task", {}).items()):
        target, reference = pair.get("target"), pair.get("reference")
        if target is None or reference is None:
            out.append({"metric": name, "kind": "relative", "passed": False, "why": "not computable"})
            continue
        allowed = rule.relative_tolerance * abs(reference)
        out.append(
            {
                "metric": name,
                "kind": "relative",
                "target": target,
                "reference": reference,
                "relative_diff": (target - reference) / abs(reference) if reference else None,
                "allowed": allowed,
                "passed": abs(target - reference) <= allowed + 1e-12,
                "lower_is_better": name in LOWER_IS_BETTER,
            }
        )
    for name, value in sorted(result.get("agreement", {}).items()):
        if name not in rule.bounds:
            continue
        kind, bound = rule.bounds[name]
        if value is None:
            passed = False
        elif kind == "min":
            passed = value >= bound
        elif kind == "max":
            passed = value <= bound
        else:
            passed = abs(value - 1.0) <= bound
        out.append({"metric": name, "kind": kind, "value": value, "bound": bound, "passed": bool(passed)})
    return out


def verdict(all_checks: list[dict[str, Any]]) -> str:
    return "pass" if all_checks and all(c["passed"] for c in all_checks) else "fail"
