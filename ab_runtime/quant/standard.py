"""The framework's accuracy standard for quantized checkpoints, one row per scheme.

Where the numbers come from (docs/quantization.md):
- cosine: msprobe's tensor-comparison pass rule (cosine > 0.99) for W8A8, the same bound the
  framework's bfloat16 row uses, since an int8 step (1/127 of the row's max) is of bfloat16's
  order (2^-7). W8A16 quantizes one operand of each product instead of two and is held an order
  tighter (0.999).
- scaled max error (max |q - r| / max |r|): int8's step 2^-7 times the accumulation allowance of 8
  the bfloat16 row uses for a whole model; W8A16 gets half of it (one quantized operand).
- perplexity: vLLM-Ascend's accuracy CI accepts lm-eval metrics within rtol 0.05 of the baseline
  (0.03 for its stricter models): W8A8 gets 0.05, W8A16 0.03.
- top-1 agreement (teacher-forced: the same prefix for both models at every position): the
  low-precision rows' label match (0.9) for W8A8, 0.95 for W8A16. Free-running greedy agreement is
  recorded but not judged: one early flip on a near-flat distribution (any random-weight model)
  changes every later token, so it measures the weights' confidence, not the quantization.

Standard library only, so the gate reads the same numbers the runtime applies.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

STANDARD_NAME = "ascendbridge-quantization/1"
INT8_STEP = 2.0**-7
ACCUMULATION_FACTOR = 8.0


@dataclass(frozen=True)
class QuantRow:
    cosine_min: float
    max_abs_err_scaled_max: float
    perplexity_rel_delta_max: float
    top1_agreement_min: float


W8A8 = QuantRow(0.99, ACCUMULATION_FACTOR * INT8_STEP, 0.05, 0.9)
STANDARD: dict[str, QuantRow] = {
    "W8A8_DYNAMIC": W8A8,
    "W8A16": QuantRow(0.999, ACCUMULATION_FACTOR * INT8_STEP / 2, 0.03, 0.95),
    # compressed-tensors' W8A8 (LLM-Compressor): the same numerics (int8 weights per channel, int8
    # activations per token at run time, symmetric), so the same row.
    "CT_W8A8": W8A8,
}


def judge(scheme: str, figures: dict[str, float]) -> dict[str, object]:
    """Verdict of one scheme's figures against its row: passed, and each rule with its numbers."""
    row = STANDARD[scheme]
    rules = {
        "cosine_min": (figures["cosine_min"], ">=", row.cosine_min, figures["cosine_min"] >= row.cosine_min),
        "max_abs_err_scaled": (
            figures["max_abs_err_scaled"],
            "<=",
            row.max_abs_err_scaled_max,
            figures["max_abs_err_scaled"] <= row.max_abs_err_scaled_max,
        ),
        "perplexity_rel_delta": (
            figures["perplexity_rel_delta"],
            "<=",
            row.perplexity_rel_delta_max,
            abs(figures["perplexity_rel_delta"]) <= row.perplexity_rel_delta_max,
        ),
        "top1_agreement": (
            figures["top1_agreement"],
            ">=",
            row.top1_agreement_min,
            figures["top1_agreement"] >= row.top1_agreement_min,
        ),
    }
    return {
        "standard": STANDARD_NAME,
        "scheme": scheme,
        "row": asdict(row),
        "rules": {k: {"value": v, "op": op, "bound": b, "passed": ok} for k, (v, op, b, ok) in rules.items()},
        "passed": all(ok for *_, ok in rules.values()),
    }
