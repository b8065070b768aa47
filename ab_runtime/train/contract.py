"""The baseline contract: the framework's table for "the target trains like the reference".

The target and the CPU float32 reference train K steps from the same weights, data order and
seeds. The thresholds are the MindFormers migration standard and belong to the framework (like
ab_runtime/accuracy_standard.py): a spec cannot change them. Standard library only: the run
judges with this file and the gate re-judges the saved logs with the framework's copy of it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

CONTRACT_NAME = "ascendbridge-training-contract/1"

# A figure passes when its absolute OR its relative error is inside the bound.
FIRST_LOSS_ABS, FIRST_LOSS_REL = 0.005, 0.005
MEAN_LOSS_ABS, MEAN_LOSS_REL = 0.01, 0.01
GRAD_NORM_MEAN_REL = 0.10
# Per-parameter gradient cosine: reported, with a floor. A gradient whose norm is below
# GRAD_FLOOR x the largest parameter gradient norm of the step (a BERT attention key bias has an
# exactly zero gradient) is compared by its norm, not its direction: a naive cosine there is noise.
GRAD_FLOOR = 1e-6
GRAD_COSINE_MIN = 0.99

TABLE: dict[str, Any] = {
    "name": CONTRACT_NAME,
    "first_loss": {"abs": FIRST_LOSS_ABS, "rel": FIRST_LOSS_REL},
    "mean_loss": {"abs": MEAN_LOSS_ABS, "rel": MEAN_LOSS_REL},
    "grad_norm_mean_rel": GRAD_NORM_MEAN_REL,
    "grad_floor": GRAD_FLOOR,
    "grad_cosine_min": GRAD_COSINE_MIN,
}


def _errors(target: float, reference: float) -> tuple[float, float]:
    absolute = abs(target - reference)
    return absolute, absolute / abs(reference) if reference else (0.0 if absolute == 0 else math.inf)


def floored_cosine(dot: float, norm_target: float, norm_reference: float, floor_norm: float) -> dict[str, Any]:
    """Cosine of two gradients from their dot product and norms; both below `floor_norm` is
    "floored" (cosine 1 by definition, the figures are their norms), one at zero and the other
    above the floor is a real mismatch (cosine 0)."""
    figures = {"norm_target": norm_target, "norm_reference": norm_reference}
    if norm_target <= floor_norm and norm_reference <= floor_norm:
        return {"cosine": 1.0, "floored": True, **figures}
    if norm_target == 0 or norm_reference == 0:
        return {"cosine": 0.0, "floored": False, **figures}
    return {"cosine": dot / (norm_target * norm_reference), "floored": False, **figures}


def verdict(target: Mapping[str, Any], reference: Mapping[str, Any]) -> dict[str, Any]:
    """Judge two runs' logs. Each is {"losses": [...], "grad_norms": [...], "params_changed": bool,
    "optimizer_state": bool, "grad_cosines": {name: {"cosine", "floored"}} (target only),
    "resume_identical": bool, "same_initial_weights": bool (target only)}. Returns {"passed", "checks": [...], "table"}."""
    checks: list[dict[str, Any]] = []

    def check(name: str, passed: bool, **figures: Any) -> None:
        checks.append({"name": name, "passed": bool(passed), **figures})

    t_loss, r_loss = list(target["losses"]), list(reference["losses"])
    if not t_loss or len(t_loss) != len(r_loss):
        check("steps", False, target=len(t_loss), reference=len(r_loss))
        return {"passed": False, "checks": checks, "table": TABLE}
    finite = all(math.isfinite(v) for v in t_loss + r_loss)
    check("finite", finite)
    a, r = _errors(t_loss[0], r_loss[0])
    check(
        "first_loss",
        finite and (a < FIRST_LOSS_ABS or r < FIRST_LOSS_REL),
        abs_err=a,
        rel_err=r,
        target=t_loss[0],
        reference=r_loss[0],
    )
    a, r = _errors(sum(t_loss) / len(t_loss), sum(r_loss) / len(r_loss))
    check("mean_loss", finite and (a < MEAN_LOSS_ABS or r < MEAN_LOSS_REL), abs_err=a, rel_err=r)
    t_norm, r_norm = list(target["grad_norms"]), list(reference["grad_norms"])
    rels = [_errors(t, ref)[1] for t, ref in zip(t_norm, r_norm, strict=True)]
    mean_rel = sum(rels) / len(rels) if rels else math.inf
    check("grad_norm_mean", mean_rel <= GRAD_NORM_MEAN_REL, rel_err=mean_rel)
    check("params_changed", bool(target.get("params_changed")) and bool(reference.get("params_changed")))
    check("optimizer_state", bool(target.get("optimizer_state")) and bool(reference.get("optimizer_state")))
    check("resume_identical", bool(target.get("resume_identical")))
    check("same_initial_weights", bool(target.get("same_initial_weights")))
    cosines = target.get("grad_cosines") or {}
    worst = min(((v["cosine"], k) for k, v in cosines.items() if not v.get("floored")), default=(1.0, None))
    check(
        "grad_cosine",
        worst[0] >= GRAD_COSINE_MIN,
        min_cosine=worst[0],
        parameter=worst[1],
        floored=sorted(k for k, v in cosines.items() if v.get("floored")),
    )
    return {"passed": all(c["passed"] for c in checks), "checks": checks, "table": TABLE}


LOSS_CHECKS = ("steps", "finite", "first_loss", "mean_loss", "grad_norm_mean")  # the checks on losses alone


def loss_verdict(candidate: Mapping[str, Any], baseline: Mapping[str, Any]) -> dict[str, Any]:
    """The contract's loss checks of a training pass's K steps ({"losses", "grad_norms"}) against
    the same steps without it (ab_runtime/train/passes.py): a pass may not change what is learnt."""
    checks = [c for c in verdict(candidate, baseline)["checks"] if c["name"] in LOSS_CHECKS]
    return {"passed": all(c["passed"] for c in checks), "checks": checks}


# Evaluation before / after: the held-out loss must fall by more than this fraction to count as
# improved, rise by more than it to count as worse.
EVAL_FLAT_REL = 0.01


def evaluation_verdict(before: float, after: float, train_loss: float | None = None) -> dict[str, Any]:
    """improved / flat / worse from the held-out loss before and after training, with the
    train-versus-held-out gap (positive: held-out worse than train, the overfitting sign)."""
    change = (after - before) / before if before else 0.0
    rule = "improved" if change < -EVAL_FLAT_REL else "worse" if change > EVAL_FLAT_REL else "flat"
    return {
        "before": before,
        "after": after,
        "relative_change": change,
        "verdict": rule,
        "rule": f"held-out loss change < -{EVAL_FLAT_REL:.0%}: improved; > +{EVAL_FLAT_REL:.0%}: worse; else flat",
        "gap": None if train_loss is None else after - train_loss,
    }
