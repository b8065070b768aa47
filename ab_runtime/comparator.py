"""Accuracy verdicts for model outputs: target run vs reference run, per output tensor.

Shared by the benchmark stage (accuracy_run.py and its gate) and the optimization stage. Runs
inside adaptation environments: it imports torch and the standard library only, so the gates can
load the framework's copy of this file by path and recompute every figure independently.

The numbers are the framework's accuracy standard (accuracy_standard.py, one table per dtype and
task family); a spec's `tolerances` only request changes the standard bounds. Optimized
configurations are judged by judge_optimized: the one optimization budget against the float32
reference, whatever dtype the passes compute in.

Rules (all recorded in each result so a reader sees exactly what was applied):
- structure: same output names and shapes; no nan/inf in the target where the reference is finite.
- msprobe-style (default): cosine >= cosine_min (stricter for float32) and max abs error
  <= bound * scale, where scale = max |reference| and the bound grows with the target dtype's
  precision (Ascend's per-dtype standards: fp32 2^-13, fp16 2^-10, bf16 2^-7, times an
  accumulation allowance for a whole model).
- dynamo-harness (only where a float64 reference exists): RMSE(target, fp64) must not exceed
  multiplier * RMSE(baseline, fp64) + floor * RMS(reference), i.e. the target may not be much
  worse than the fp32 baseline was against the exact answer; the floor is wider for fp16/bf16,
  whose rounding alone is far above an fp32 baseline's error.
- integer / bool outputs (labels, ids): fraction of equal elements >= label_match_min.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch


def _load_standard() -> ModuleType:
    """accuracy_standard next to this file: a package import inside adaptations, a file-path import
    when a gate loads the framework's copy of this module by path."""
    try:
        from . import accuracy_standard

        return accuracy_standard
    except ImportError:
        path = Path(__file__).with_name("accuracy_standard.py")
        name = f"{__name__}_accuracy_standard"
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None, f"cannot load {path}"
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module  # dataclasses resolve their module through sys.modules
            spec.loader.exec_module(module)
        return sys.modules[name]


standard = _load_standard()


@dataclass(frozen=True)
class Thresholds:
    """The framework's accuracy standard plus the spec's `tolerances` requests, which the standard
    bounds (accuracy_standard.resolve): a spec can tighten, or loosen within stated bounds, never more."""

    tolerances: Mapping[str, Any] = field(default_factory=dict)  # the spec's section, as written
    family: str = "*"

    def for_dtype(self, dtype: str) -> dict[str, Any]:
        """The concrete numbers applied to an output computed in `dtype`, with the decisions taken."""
        return standard.resolve(dtype, self.tolerances, self.family)

    @classmethod
    def from_spec(cls, tolerances: Mapping[str, Any] | None, family: str = "*") -> Thresholds:
        """From the spec's `tolerances` section (requests only: the standard decides what applies)."""
        return cls(dict(tolerances or {}), family)

    def as_dict(self) -> dict[str, Any]:
        return {"standard": standard.STANDARD_NAME, "requested": dict(self.tolerances)}


@dataclass
class OutputComparison:
    name: str
    kind: str  # "float" | "label" | "mismatch"
    verdict: str  # "pass" | "fail"
    reasons: list[str] = field(default_factory=list)
    shape: list[int] = field(default_factory=list)
    reference_shape: list[int] = field(default_factory=list)
    dtype: str = ""
    metrics: dict[str, float | None] = field(default_factory=dict)
    applied: dict[str, Any] = field(default_factory=dict)


def flatten_outputs(value: Any, prefix: str = "") -> dict[str, torch.Tensor]:
    """Named tensors from nested outputs: tensors, tuples/lists, dicts and ModelOutput objects.

    ModelOutput is a dict subclass, so its None fields are absent and its names are kept. Caches
    and other non-tensor objects (past_key_values) are skipped: they are not results.
    """
    out: dict[str, torch.Tensor] = {}
    if isinstance(value, torch.Tensor):
        out[prefix or "output"] = value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            out.update(flatten_outputs(item, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            out.update(flatten_outputs(item, f"{prefix}.{i}" if prefix else str(i)))
    return out


def _is_label(t: torch.Tensor) -> bool:
    return not (t.is_floating_point() or t.is_complex())


def _dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def _float_metrics(target: torch.Tensor, reference: torch.Tensor) -> dict[str, float]:
    t = target.detach().to("cpu", torch.float64).flatten()
    r = reference.detach().to("cpu", torch.float64).flatten()
    diff = (t - r).abs()
    scale = float(r.abs().max()) if r.numel() else 0.0
    tn, rn = float(t.norm()), float(r.norm())
    if tn == 0.0 and rn == 0.0:
        cosine = 1.0
    elif tn == 0.0 or rn == 0.0:
        cosine = 0.0
    else:
        cosine = float(torch.dot(t, r) / (tn * rn))
    return {
        "cosine": cosine,
        "max_abs_err": float(diff.max()) if diff.numel() else 0.0,
        "rmse": float(diff.pow(2).mean().sqrt()) if diff.numel() else 0.0,
        "scale": scale,
    }


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    d = a.detach().to("cpu", torch.float64) - b.detach().to("cpu", torch.float64)
    return float(d.pow(2).mean().sqrt()) if d.numel() else 0.0


def compare_tensor(
    name: str,
    target: torch.Tensor,
    reference: torch.Tensor,
    thresholds: Thresholds | OptimizationBudget,
    target_dtype: str,
    fp64_reference: torch.Tensor | None = None,
) -> OutputComparison:
    """One output's verdict. `target_dtype` is the dtype the target run computed in."""
    applied = {k: v for k, v in thresholds.for_dtype(target_dtype).items() if k != "decisions"}
    result = OutputComparison(
        name=name,
        kind="label" if _is_label(reference) else "float",
        verdict="pass",
        shape=list(target.shape),
        reference_shape=list(reference.shape),
        dtype=_dtype_name(target),
        applied=applied,
    )
    if target.shape != reference.shape:
        result.kind, result.verdict = "mismatch", "fail"
        result.reasons.append(f"shape {list(target.shape)} != reference {list(reference.shape)}")
        return result
    if _is_label(reference) != _is_label(target):
        result.kind, result.verdict = "mismatch", "fail"
        result.reasons.append(f"dtype kind {result.dtype} != reference {_dtype_name(reference)}")
        return result
    if result.kind == "label":
        total = reference.numel()
        equal = int((target.detach().cpu() == reference.detach().cpu()).sum()) if total else 0
        rate = equal / total if total else 1.0
        result.metrics = {"match_rate": rate, "elements": float(total)}
        if rate < applied["label_match_min"]:
            result.reasons.append(f"match rate {rate:.4f} < {applied['label_match_min']}")
    else:
        finite_t = bool(torch.isfinite(target).all())
        finite_r = bool(torch.isfinite(reference).all())
        result.metrics["finite"] = float(finite_t)
        if not finite_r:
            result.reasons.append("reference has nan/inf: no meaningful comparison")
        elif not finite_t:
            n_bad = int((~torch.isfinite(target)).sum())
            result.reasons.append(f"target has {n_bad} nan/inf values")
        else:
            m = _float_metrics(target, reference)
            floor = max(m["scale"] * applied["rel_err_floor"], 1e-30)
            rel = (target.detach().to("cpu", torch.float64) - reference.detach().to("cpu", torch.float64)).abs()
            rel = rel / reference.detach().to("cpu", torch.float64).abs().clamp_min(floor)
            m["max_rel_err"] = float(rel.max()) if rel.numel() else 0.0
            m["max_abs_err_scaled"] = m["max_abs_err"] / m["scale"] if m["scale"] > 0 else m["max_abs_err"]
            result.metrics.update(m)
            if m["cosine"] < applied["cosine_min"]:
                result.reasons.append(f"cosine {m['cosine']:.6f} < {applied['cosine_min']}")
            if m["max_abs_err_scaled"] > applied["max_abs_err_scaled_max"]:
                result.reasons.append(
                    f"max abs err {m['max_abs_err']:.3e} = {m['max_abs_err_scaled']:.3e} x scale "
                    f"> {applied['max_abs_err_scaled_max']:.3e} x scale"
                )
            if fp64_reference is not None and fp64_reference.shape == reference.shape:
                base = _rmse(reference, fp64_reference)
                res = _rmse(target, fp64_reference)
                ref_rms = float(reference.detach().to("cpu", torch.float64).pow(2).mean().sqrt())
                allowed = applied["dynamo_multiplier"] * base + applied["dynamo_floor_rms_scaled"] * ref_rms
                result.metrics.update(
                    {"rmse_vs_fp64": res, "baseline_rmse_vs_fp64": base, "dynamo_allowed_rmse": allowed}
                )
                if res > allowed:
                    result.reasons.append(
                        f"RMSE vs float64 {res:.3e} > allowed {allowed:.3e} "
                        f"({applied['dynamo_multiplier']} x baseline {base:.3e} + floor)"
                    )
    if result.reasons:
        result.verdict = "fail"
    return result


def compare_outputs(
    target: Any,
    reference: Any,
    thresholds: Thresholds | OptimizationBudget,
    target_dtype: str,
    fp64_reference: Any = None,
) -> dict[str, Any]:
    """Compare nested outputs name by name; a missing or extra output fails the verdict."""
    t, r = flatten_outputs(target), flatten_outputs(reference)
    f64 = flatten_outputs(fp64_reference) if fp64_reference is not None else {}
    outputs: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for name in sorted(set(r) - set(t)):
        problems.append(f"output '{name}' missing from target")
    for name in sorted(set(t) - set(r)):
        problems.append(f"output '{name}' not in reference")
    for name in sorted(set(t) & set(r)):
        outputs[name] = asdict(compare_tensor(name, t[name], r[name], thresholds, target_dtype, f64.get(name)))
    diagnosis = route_diagnosis(t, r, outputs)
    failed = [n for n, o in outputs.items() if o["verdict"] != "pass"]
    if not outputs and not problems:
        problems.append("no tensor outputs to compare")
    verdict = "pass" if not failed and not problems else "fail"
    return {
        "verdict": verdict,
        "failed_outputs": failed,
        "problems": problems,
        "float64_reference": bool(f64),
        "diagnosis": diagnosis,
        "thresholds": {"base": thresholds.as_dict(), "applied": thresholds.for_dtype(target_dtype)},
        "outputs": outputs,
    }


# --- mixture-of-experts routing: decisions compared, near-ties named (issue 13) ---


def _route_flips(
    target: torch.Tensor, reference: torch.Tensor, logits: torch.Tensor, tie_scaled: float
) -> tuple[int, int, int, float]:
    """(tokens, flipped, flipped at a clear margin, largest flipped margin / scale) of one layer's
    routing decisions; the margin is the reference router's gap between its k-th chosen expert
    and the best expert it did not choose."""
    k = reference.shape[-1]
    t, r = target.reshape(-1, k).cpu(), reference.reshape(-1, k).cpu()
    flipped = (t != r).any(dim=-1)
    values = logits.detach().to("cpu", torch.float64).reshape(-1, logits.shape[-1])
    if values.shape[0] != r.shape[0] or values.shape[-1] <= k:
        return r.shape[0], int(flipped.sum()), int(flipped.sum()), float("inf")
    top = values.topk(k + 1, dim=-1).values
    scale = float(values.abs().max()) or 1.0
    margin = (top[:, k - 1] - top[:, k]) / scale
    clear = flipped & (margin > tie_scaled)
    largest = float(margin[flipped].max()) if bool(flipped.any()) else 0.0
    return r.shape[0], int(flipped.sum()), int(clear.sum()), largest


def route_diagnosis(
    target: Mapping[str, torch.Tensor], reference: Mapping[str, torch.Tensor], outputs: dict[str, dict[str, Any]]
) -> list[str]:
    """Routing decisions (`routing.N`, with the reference's `router_logits.N`) that differ: a flip
    where the reference router was at a near-tie (gap <= the standard's max error for the dtype,
    relative to the router's scale) is rounding deciding between two equal experts, so that
    output passes and the diagnosis says so, and names the outputs that differ after it; a flip at
    a clear margin fails. Updates `outputs` in place; returns the diagnosis lines."""
    lines: list[str] = []
    tie_flipped: list[str] = []
    for name in sorted(n for n in outputs if n.startswith("routing.")):
        logits = reference.get("router_logits." + name.split(".", 1)[1])
        result = outputs[name]
        if logits is None or result["kind"] != "label" or name not in target:
            continue
        tie = result["applied"]["max_abs_err_scaled_max"]
        tokens, flipped, clear, largest = _route_flips(target[name], reference[name], logits, tie)
        result["metrics"].update({"route_flips": float(flipped), "route_flips_clear": float(clear)})
        if not flipped:
            continue
        if clear:
            result["verdict"] = "fail"
            result["reasons"].append(
                f"{clear} of {tokens} tokens routed to other experts at a clear margin "
                f"(reference gap up to {largest:.2e} x scale > near-tie {tie:.2e})"
            )
            lines.append(
                f"{name}: {clear} of {tokens} tokens changed experts although the reference router "
                "was not at a tie: a real routing difference"
            )
            continue
        result["verdict"], result["reasons"] = "pass", []
        tie_flipped.append(name)
        lines.append(
            f"{name}: {flipped} of {tokens} tokens routed to other experts, each at a near-tie "
            f"(reference gap <= {largest:.2e} x scale, near-tie bound {tie:.2e}): rounding chose "
            "between two equally scored experts, not a defect"
        )
    failing = [n for n, o in outputs.items() if o["verdict"] != "pass" and not n.startswith("routing.")]
    if tie_flipped and failing:
        lines.append(
            f"{', '.join(sorted(failing))} differ after near-tie route flips in {', '.join(tie_flipped)}: "
            "the flipped route, not an operator, may explain the difference"
        )
    return lines


@dataclass(frozen=True)
class OptimizationBudget:
    """The one optimization accuracy budget (accuracy_standard.OPTIMIZATION_BUDGET), in the shape
    compare_outputs applies: the same numbers whatever dtype a pass computes in."""

    family: str = "*"
    tolerances: Mapping[str, Any] = field(default_factory=dict)  # the spec's section (may tighten only)

    def for_dtype(self, dtype: str) -> dict[str, Any]:
        statement = standard.budget_statement(self.family, self.tolerances)
        return {"standard": statement.pop("name"), "target_dtype": dtype, **statement, "rel_err_floor": 1e-3}

    def as_dict(self) -> dict[str, Any]:
        return {"standard": standard.OPTIMIZATION_BUDGET_NAME, "family": self.family}


def top1_agreement(target: torch.Tensor, reference: torch.Tensor) -> float:
    """Fraction of positions whose argmax over the last axis (token, label, position) is the reference's."""
    if target.shape != reference.shape or target.dim() == 0 or not reference.numel():
        return 0.0
    t, r = target.detach().to("cpu", torch.float32).argmax(-1), reference.detach().to("cpu", torch.float32).argmax(-1)
    return float((t == r).float().mean())


def judge_optimized(
    optimized: Any, reference: Any, family: str, computed_in: str, tolerances: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """An optimized configuration's outputs against the float32 reference outputs, judged by the
    optimization budget (cosine, max error, top-1 agreement), never by the dtype of its passes.

    `computed_in` (the dtype the passes compute in) is recorded, not used to pick thresholds; the
    spec's `tolerances.optimization` may only tighten the budget.
    """
    budget = OptimizationBudget(family, dict(tolerances or {}))
    result = compare_outputs(optimized, reference, budget, computed_in)
    applied = result["thresholds"]["applied"]
    for name, out in result["outputs"].items():
        if out["kind"] != "float" or name.rsplit(".", 1)[-1] not in applied["top1_outputs"]:
            continue
        rate = top1_agreement(flatten_outputs(optimized)[name], flatten_outputs(reference)[name])
        out["metrics"]["top1_agreement"] = rate
        if rate < applied["top1_agreement_min"]:
            out["reasons"].append(f"top-1 agreement {rate:.4f} < {applied['top1_agreement_min']}")
            out["verdict"] = "fail"
    result["failed_outputs"] = sorted(n for n, o in result["outputs"].items() if o["verdict"] != "pass")
    result["verdict"] = "pass" if not result["failed_outputs"] and not result["problems"] else "fail"
    return result
