"""The baseline contract's table and verdict, and the evaluation rule (standard library: no torch)."""

from __future__ import annotations

import copy
from typing import Any

from ab_runtime.train import contract


def logs() -> tuple[dict[str, Any], dict[str, Any]]:
    reference = {
        "losses": [6.0, 5.5, 5.0],
        "grad_norms": [2.0, 1.8, 1.6],
        "params_changed": True,
        "optimizer_state": True,
    }
    target = {
        **copy.deepcopy(reference),
        "losses": [6.001, 5.502, 5.003],
        "grad_norms": [2.05, 1.85, 1.62],
        "resume_identical": True,
        "same_initial_weights": True,
        "grad_cosines": {"w": {"cosine": 0.9999, "floored": False}, "key.bias": {"cosine": 1.0, "floored": True}},
    }
    return target, reference


def failed(result: dict[str, Any]) -> list[str]:
    return [c["name"] for c in result["checks"] if not c["passed"]]


def test_a_close_target_passes_and_each_rule_can_fail() -> None:
    target, reference = logs()
    assert contract.verdict(target, reference)["passed"], failed(contract.verdict(target, reference))
    cases = {
        "first_loss": lambda t: t["losses"].__setitem__(0, 6.2),
        "mean_loss": lambda t: t.__setitem__("losses", [6.001, 5.7, 5.2]),
        "grad_norm_mean": lambda t: t.__setitem__("grad_norms", [2.5, 2.2, 2.0]),
        "params_changed": lambda t: t.__setitem__("params_changed", False),
        "optimizer_state": lambda t: t.__setitem__("optimizer_state", False),
        "resume_identical": lambda t: t.__setitem__("resume_identical", False),
        "same_initial_weights": lambda t: t.__setitem__("same_initial_weights", False),
        "grad_cosine": lambda t: t["grad_cosines"].__setitem__("w", {"cosine": 0.9, "floored": False}),
        "finite": lambda t: t["losses"].__setitem__(2, float("nan")),
    }
    for name, edit in cases.items():
        bad = copy.deepcopy(target)
        edit(bad)
        result = contract.verdict(bad, reference)
        assert not result["passed"] and name in failed(result), (name, failed(result))


def test_a_zero_gradient_on_both_sides_is_floored_not_a_false_alarm() -> None:
    floored = contract.floored_cosine(dot=-1e-20, norm_target=1e-10, norm_reference=1e-10, floor_norm=1e-6)
    assert floored["floored"] and floored["cosine"] == 1.0
    one_sided = contract.floored_cosine(dot=0.0, norm_target=0.0, norm_reference=0.5, floor_norm=1e-6)
    assert not one_sided["floored"] and one_sided["cosine"] == 0.0
    assert abs(contract.floored_cosine(1.0, 1.0, 1.0, 1e-6)["cosine"] - 1.0) < 1e-12


def test_the_evaluation_rule_names_improved_flat_and_worse() -> None:
    assert contract.evaluation_verdict(5.0, 4.0, 3.5)["verdict"] == "improved"
    assert contract.evaluation_verdict(5.0, 5.02)["verdict"] == "flat"
    assert contract.evaluation_verdict(5.0, 5.2)["verdict"] == "worse"
    assert contract.evaluation_verdict(5.0, 4.0, 3.5)["gap"] == 0.5
