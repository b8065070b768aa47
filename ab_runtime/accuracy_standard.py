"""The framework's accuracy standard: one table of thresholds per target dtype and task family.

The thresholds belong to the framework, not to the adaptation: a spec's `tolerances` section may
only tighten a threshold, or loosen it within the bound this table states; a request beyond the
bound is refused (the standard's value applies) and every accepted or refused change is returned
as a decision the gate report shows to people. Agents may not touch `tolerances` at all (the
healer's FORBIDDEN_KEYS).

An optimized configuration is judged by one named budget (OPTIMIZATION_BUDGET) against the float32
reference, never by the lower dtype a pass computes in.

Standard library only: ab_runtime.comparator applies it inside adaptations, and the framework's
gates import this same file (ab_runtime/accuracy_standard.py), so there is one
copy of every number.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

STANDARD_NAME = "ascendbridge-accuracy/1"

# Ascend single-benchmark relative-error standards per dtype (ATK / msprobe), times an
# accumulation allowance of 8 for a whole model in low precision.
DTYPE_EPSILON: dict[str, float] = {"float64": 2.0**-13, "float32": 2.0**-13, "float16": 2.0**-10, "bfloat16": 2.0**-7}
LOW_PRECISION = frozenset({"float16", "bfloat16"})
ACCUMULATION_FACTOR = 8.0


@dataclass(frozen=True)
class Row:
    """The thresholds applied to outputs computed in one dtype."""

    cosine_min: float
    max_abs_err_scaled_max: float  # bound on max|t - r| / max|r|
    label_match_min: float  # integer / bool outputs: fraction of equal elements
    dynamo_multiplier: float  # RMSE vs float64 may be this many times the fp32 baseline's ...
    dynamo_floor_rms_scaled: float  # ... plus this fraction of the reference's RMS
    rel_err_floor: float = 1e-3  # max rel err divides by max(|r|, floor * scale)


_FP32 = Row(
    cosine_min=0.9999,
    max_abs_err_scaled_max=1e-3,
    label_match_min=1.0,
    dynamo_multiplier=2.0,
    dynamo_floor_rms_scaled=1e-4,
)


def _low(dtype: str) -> Row:
    return Row(
        cosine_min=0.99,
        max_abs_err_scaled_max=ACCUMULATION_FACTOR * DTYPE_EPSILON[dtype],
        label_match_min=0.9,
        dynamo_multiplier=3.0,
        dynamo_floor_rms_scaled=5e-2,
    )


# (task family, dtype) -> Row; family "*" is every family without a row of its own.
TABLE: dict[tuple[str, str], Row] = {
    ("*", "float64"): _FP32,
    ("*", "float32"): _FP32,
    ("*", "float16"): _low("float16"),
    ("*", "bfloat16"): _low("bfloat16"),
    # --- audio, time series, LLM embedders, rerankers (issue 13) ---
    # Forecasts compound over the horizon and through instance normalisation (loc/scale): in low
    # precision the bound doubles; float32 keeps the standard.
    **{
        ("time_series_forecasting", d): replace(_low(d), max_abs_err_scaled_max=2 * _low(d).max_abs_err_scaled_max)
        for d in sorted(LOW_PRECISION)
    },
    # A reranker gives one score per pair: the cosine over a handful of scores hides a wrong
    # score easily, so in low precision it must reach 0.995 (the error bound is the standard's).
    **{("reranker", d): replace(_low(d), cosine_min=0.995) for d in sorted(LOW_PRECISION)},
    # --- vision families (issue 13) ---
    # A segmentation mask is an argmax per pixel: with thousands of pixels one near-tie between two
    # classes flips a pixel even in float32, so the mask may differ in 1 pixel in 1000 (its logits
    # are held to the float32 row). Low precision keeps the default 0.9 of pixels.
    ("semantic_segmentation", "float64"): replace(_FP32, label_match_min=0.999),
    ("semantic_segmentation", "float32"): replace(_FP32, label_match_min=0.999),
    # --- end vision families ---
}

# Keys a spec may set, and the loosest value it may set per dtype class (a human's decision,
# recorded in the gate report). Anything looser is refused.
ADJUSTABLE = ("cosine_min", "max_abs_err_scaled_max", "label_match_min")
HIGHER_IS_STRICTER = {"cosine_min": True, "max_abs_err_scaled_max": False, "label_match_min": True}
PHYSICAL = {
    "cosine_min": (-1.0, 1.0),
    "max_abs_err_scaled_max": (0.0, float("inf")),
    "label_match_min": (0.0, 1.0),
    "top1_agreement_min": (0.0, 1.0),
}


def loosest(dtype: str, key: str) -> float:
    """The bound a spec may loosen `key` to for `dtype`: stated here, documented in docs/benchmark.md."""
    row = row_for("*", dtype)
    if key == "max_abs_err_scaled_max":
        return 4.0 * row.max_abs_err_scaled_max
    if key == "cosine_min":
        return 0.999 if dtype not in LOW_PRECISION else 0.98
    return 0.99 if dtype not in LOW_PRECISION else 0.8


# The optimization accuracy budget: an optimized configuration's outputs against the float32
# reference outputs, whatever dtype its passes compute in. "top1_agreement_min" is the task-level
# agreement: the fraction of positions whose argmax over the last axis (next token, label, class,
# start/end position) equals the reference's, on the outputs the task family names below.
OPTIMIZATION_BUDGET_NAME = "optimization-budget/1"
BUDGET_SECTION = "optimization"  # tolerances.optimization: requests that tighten the budget
OPTIMIZATION_BUDGET: dict[str, float] = {
    "cosine_min": 0.99,
    "max_abs_err_scaled_max": 0.0625,
    "top1_agreement_min": 0.9,
    "label_match_min": 0.9,
}
TOP1_OUTPUTS: dict[str, tuple[str, ...]] = {
    "causal_lm": ("logits",),
    "masked_lm": ("logits",),
    "seq2seq": ("logits",),
    "speech_seq2seq": ("logits",),
    "vision_seq2seq": ("logits",),
    "sequence_classification": ("logits",),
    "token_classification": ("logits",),
    "image_classification": ("logits",),
    "question_answering": ("start_logits", "end_logits"),
    "feature_extraction": (),  # embeddings: cosine and max error only
    # issue 13: CTC frames' argmax is the greedy transcript; one label per clip; forecasts,
    # embeddings and single rerank scores have no argmax to agree on
    "ctc_speech_recognition": ("logits",),
    "audio_classification": ("logits",),
    "time_series_forecasting": (),
    "llm_embedding": (),
    "reranker": (),
    # --- vision families (issue 13) ---
    "image_text_to_text": ("logits",),  # the next token after image and text
    "zero_shot_image_classification": ("logits_per_image", "logits_per_text"),  # the best-matching text / image
    "object_detection": ("logits",),  # each query's class (boxes and scores: cosine and max error)
    "semantic_segmentation": (),  # class axis is dim 1: the derived mask is compared as labels instead
    "depth_estimation": (),  # a regression map: cosine and max error only
    # --- end vision families ---
}


def budget_statement(family: str, tolerances: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The optimization budget as the notes state it: its name, numbers, reference and outputs,
    after the spec's `tolerances.optimization` requests, which may only tighten it."""
    budget = dict(OPTIMIZATION_BUDGET)
    decisions = _apply_requests(BUDGET_SECTION, budget, tolerances, _decide_budget)
    return {
        "name": OPTIMIZATION_BUDGET_NAME,
        "against": "float32 reference",
        **budget,
        "top1_outputs": list(TOP1_OUTPUTS.get(family, ())),
        "decisions": decisions,
    }


GENERATION_RULE_NAME = "generation-greedy/1"


def generation_verdict(
    match_rate: float, first_divergence: int | None, family: str, tolerances: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """An optimized generation's greedy tokens judged against the eager reference's.

    The rule is the budget's task-level agreement: the fraction of equal generated tokens must reach
    `top1_agreement_min` (the bound a forward pass's next-token argmax is held to; a spec asking
    `tolerances.optimization.top1_agreement_min = 1.0` demands token-for-token equality). Greedy
    decoding feeds each token back, so one early divergence changes everything after it: the
    first divergence is reported with the rate, as NPU porting tools do to locate drift.
    """
    need = budget_statement(family, tolerances)["top1_agreement_min"]
    return {
        "rule": GENERATION_RULE_NAME,
        "match_rate": match_rate,
        "first_divergence": first_divergence,
        "match_rate_min": need,
        "verdict": "pass" if match_rate >= need else "fail",
    }


def _decide_budget(key: str, requested: float) -> dict[str, Any]:
    standard = OPTIMIZATION_BUDGET[key]
    return _judge(
        BUDGET_SECTION,
        key,
        requested,
        standard,
        standard,
        key != "max_abs_err_scaled_max",
        PHYSICAL.get(key, (0.0, 1.0)),
        "refused: the optimization budget can only be tightened",
    )


def _judge(
    section: str,
    key: str,
    requested: float,
    standard: float,
    bound: float,
    higher_is_stricter: bool,
    limits: tuple[float, float],
    too_loose: str,
) -> dict[str, Any]:
    """One request against its standard and the loosest bound allowed (`too_loose` past it): the
    decision record every gate report shows."""
    low, high = limits
    stricter = requested >= standard if higher_is_stricter else requested <= standard
    within = requested >= bound if higher_is_stricter else requested <= bound
    if not low <= requested <= high:
        decision, applied = f"refused: outside [{low}, {high}]", standard
    elif requested == standard:
        decision, applied = "unchanged", standard
    elif stricter:
        decision, applied = "tightened", requested
    elif within:
        decision, applied = "loosened within the framework's bound", requested
    else:
        decision, applied = too_loose, standard
    return {
        "dtype": section,
        "key": key,
        "standard": standard,
        "requested": requested,
        "bound": bound,
        "applied": applied,
        "decision": decision,
    }


# Before the standard, specs carried these three flat keys with these values (the framework's
# defaults then): they meant "the standard" and are read as no request at all.
_LEGACY_KEYS = {"cosine_min": 0.99, "fp32_cosine_min": 0.9999, "max_abs_err_scaled": 1e-3}


def row_for(family: str, dtype: str) -> Row:
    """The table's row; dtypes outside the table (int8 weights, ...) get the float32 row."""
    return TABLE.get((family, dtype)) or TABLE.get(("*", dtype)) or TABLE[("*", "float32")]


def normalize(tolerances: Mapping[str, Any] | None) -> dict[str, dict[str, float]]:
    """A spec's `tolerances` as {dtype: {key: value}}; legacy flat keys are translated.

    Raises ValueError naming the first key or value that is not a threshold request.
    """
    if not tolerances:
        return {}
    if not isinstance(tolerances, Mapping):
        raise ValueError("tolerances must be an object {dtype: {threshold: value}}")
    if set(tolerances) <= set(_LEGACY_KEYS):
        legacy = {k: float(v) for k, v in tolerances.items() if float(v) != _LEGACY_KEYS[k]}
        out: dict[str, dict[str, float]] = {}
        for key, value in legacy.items():
            if key == "cosine_min":
                for dtype in sorted(LOW_PRECISION):
                    out.setdefault(dtype, {})["cosine_min"] = value
            elif key == "fp32_cosine_min":
                out.setdefault("float32", {})["cosine_min"] = value
            else:
                out.setdefault("float32", {})["max_abs_err_scaled_max"] = value
        return out
    out = {}
    for dtype, requests in tolerances.items():
        if dtype not in DTYPE_EPSILON and dtype != BUDGET_SECTION:
            raise ValueError(
                f"tolerances: '{dtype}' is neither a dtype of the standard ({', '.join(DTYPE_EPSILON)}) "
                f"nor '{BUDGET_SECTION}'"
            )
        if not isinstance(requests, Mapping):
            raise ValueError(f"tolerances.{dtype} must be an object")
        allowed = tuple(OPTIMIZATION_BUDGET) if dtype == BUDGET_SECTION else ADJUSTABLE
        for key, value in requests.items():
            if key not in allowed:
                raise ValueError(f"tolerances.{dtype}.{key}: not adjustable (only {', '.join(allowed)})")
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"tolerances.{dtype}.{key} must be a number")
            out.setdefault(dtype, {})[key] = float(value)
    return out


def decide(dtype: str, key: str, requested: float, family: str = "*") -> dict[str, Any]:
    """One request judged against the standard: tightened, loosened within the bound, or refused."""
    standard, bound = getattr(row_for(family, dtype), key), loosest(dtype, key)
    return _judge(
        dtype,
        key,
        requested,
        standard,
        bound,
        HIGHER_IS_STRICTER[key],
        PHYSICAL[key],
        f"refused: looser than the framework's bound {bound:g}",
    )


def resolve(dtype: str, tolerances: Mapping[str, Any] | None = None, family: str = "*") -> dict[str, Any]:
    """The thresholds applied to outputs computed in `dtype`, after the spec's requests.

    An unreadable `tolerances` section applies the standard unchanged and says so in the decisions.
    """
    row = asdict(row_for(family, dtype))
    decisions = _apply_requests(dtype, row, tolerances, lambda key, value: decide(dtype, key, value, family))
    return {"standard": STANDARD_NAME, "target_dtype": dtype, **row, "decisions": decisions}


def _apply_requests(
    section: str,
    values: dict[str, Any],
    tolerances: Mapping[str, Any] | None,
    decide_one: Callable[[str, float], dict[str, Any]],
) -> list[dict[str, Any]]:
    """Apply the spec's requests in `tolerances[section]` to `values` as `decide_one` decides them; the
    decisions that are not `unchanged`. An unreadable section changes nothing and says so."""
    try:
        requests = normalize(tolerances).get(section, {})
        decisions = [decide_one(key, value) for key, value in sorted(requests.items())]
    except (ValueError, TypeError) as exc:
        decisions = [{"dtype": section, "key": "*", "requested": None, "decision": f"refused: {exc}"}]
    for d in decisions:
        if d["key"] in values:
            values[d["key"]] = d["applied"]
    return [d for d in decisions if d["decision"] != "unchanged"]


def human_decisions(decisions: list[dict[str, Any]]) -> list[str]:
    """One line per decision, for gate reports and summaries."""
    return [
        f"tolerances.{d['dtype']}.{d['key']} = {d['requested']}: {d['decision']}"
        + (f" (standard {d['standard']:g}, applied {d['applied']:g})" if "applied" in d else "")
        for d in decisions
    ]


def accuracy_summary(acc: dict[str, Any]) -> dict[str, Any]:
    """A comparison result's digest: verdict, the standard applied and the worst figures. The
    optimizer records it in its notes, the optimization gate recomputes it (the full result is in
    the perf run's metrics)."""
    floats = [o["metrics"] for o in acc["outputs"].values() if o["kind"] == "float" and "cosine" in o["metrics"]]
    return {
        "verdict": acc["verdict"],
        "target_dtype": acc["thresholds"]["applied"]["target_dtype"],
        "failed_outputs": acc["failed_outputs"],
        "problems": acc["problems"],
        "min_cosine": min((m["cosine"] for m in floats), default=None),
        "max_abs_err_scaled": max((m["max_abs_err_scaled"] for m in floats), default=None),
    }
