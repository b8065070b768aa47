"""The dtype does not work on the device: an op lacks a kernel for it, or outputs overflow."""

from __future__ import annotations

import re

from ascendbridge.package.spec import AdaptationSpec
from healing.failure import Failure
from healing.rules.base import Fix, FixContext, GiveUp, Match, Remedy, Rule

_DTYPE_NAMES = r"(Half|BFloat16|Float8_\w+|ComplexHalf)"
_UNSUPPORTED = re.compile(
    rf"not implemented for '{_DTYPE_NAMES}'|Low precision dtypes not supported\. Got {_DTYPE_NAMES}|"
    rf"Unsupported dtype {_DTYPE_NAMES}|doesn't support tensors of type: {_DTYPE_NAMES}|"
    r"(?:dtype|type) (float16|bfloat16) is not supported"
)
_NON_FINITE = re.compile(r"non-finite|contains? (?:nan|inf)|\bNaN\b|not finite", re.IGNORECASE)


def _fall_back_to_fp32(spec: AdaptationSpec, why: str) -> Fix | GiveUp:
    if spec.dtype.target == "float32" or spec.dtype.fallback == "float32":
        return GiveUp(f"{why}, and the run already uses float32")
    return Fix(f"{why}: fall back from {spec.dtype.target} to float32", {"dtype/fallback": "float32"})


class DtypeUnsupportedRule(Rule):
    name = "dtype_unsupported"
    description = (
        "An op has no kernel for the low-precision dtype on this device: keep the module the "
        "runtime's probe named in float32 (dtype.keep_fp32_modules), else fall back to float32."
    )

    def match(self, failure: Failure) -> Match | None:
        finding = (failure.result or {}).get("finding")
        if isinstance(finding, dict) and finding.get("module_class"):
            return Match(
                f"{finding.get('operator') or 'an op'} in {finding.get('module')} "
                f"({finding['module_class']}) does not run in {finding.get('dtype')} on "
                f"{finding.get('device')}: {finding.get('error')}",
                {
                    "dtype": finding.get("dtype"),
                    "module_class": finding["module_class"],
                    "module": finding.get("module"),
                    "operator": finding.get("operator"),
                },
            )
        found = _UNSUPPORTED.search(failure.text)
        if not found:
            return None
        dtype = next(g for g in found.groups() if g)
        return Match(f"an op does not support {dtype} on this device ({found.group(0)})", {"dtype": dtype})

    def remedy(self, spec: AdaptationSpec, match: Match, ctx: FixContext) -> Remedy:
        module_class = match.facts.get("module_class")
        if module_class and module_class not in spec.dtype.keep_fp32_modules:
            return Fix(
                f"keep {module_class} in float32 inside {match.facts.get('dtype')} runs "
                f"({match.facts.get('operator') or 'its operator'} has no kernel for that dtype)",
                {"dtype/keep_fp32_modules": [*spec.dtype.keep_fp32_modules, module_class]},
            )
        return _fall_back_to_fp32(spec, f"{match.facts['dtype']} unsupported")


class NonFiniteOutputsRule(Rule):
    name = "non_finite_outputs"
    description = "The model ran but produced nan/inf (low-precision overflow): fall back to float32."

    def match(self, failure: Failure) -> Match | None:
        outputs = (failure.result or {}).get("outputs") or {}
        bad = sorted(n for n, o in outputs.items() if isinstance(o, dict) and o.get("finite") is False)
        if bad:
            return Match(f"non-finite values in output(s): {', '.join(bad)}", {"outputs": bad})
        error = str((failure.result or {}).get("error") or "")
        if failure.result and _NON_FINITE.search(error):
            return Match(f"non-finite outputs: {error[:200]}", {"outputs": []})
        return None

    def remedy(self, spec: AdaptationSpec, match: Match, ctx: FixContext) -> Remedy:
        return _fall_back_to_fp32(spec, "nan/inf in the outputs")
