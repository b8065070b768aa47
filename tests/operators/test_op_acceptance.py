"""The operator acceptance contract (ab_runtime/ops/standard.py, acceptance.py): a correct RMSNorm
replacement passes, one with its epsilon moved refuses; the product's fused swaps pass through
their CPU reference paths, and so do the decompositions the gap report proposes (one with its scale
left out refuses); too few samples or missing edge inputs refuse whatever the errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ab_runtime.ops import standard
from ascendbridge.config import REPO_ROOT
from bench.support.torch_env import run_inner_json

INNER = Path(__file__).resolve().parent / "inner" / "acceptance_logic.py"


@pytest.fixture(scope="module")
def contracts() -> dict[str, Any]:
    return run_inner_json(INNER, str(REPO_ROOT))


def test_the_right_rms_norm_passes(contracts: dict[str, Any]) -> None:
    right = contracts["right"]
    assert right["accepted"] and right["samples"] >= standard.MIN_SAMPLES and right["failed"] == 0


@pytest.mark.parametrize("wrong", ["eps_outside", "eps_squared"])
def test_an_rms_norm_with_its_epsilon_moved_is_refused(contracts: dict[str, Any], wrong: str) -> None:
    verdict = contracts[wrong]
    assert not verdict["accepted"] and verdict["failed"] > 0
    kinds = {s["kind"] for s in verdict["failed_samples"]}
    assert kinds <= {"tiny", "zeros", "mixed"} and "tiny" in kinds  # only edge inputs show it
    assert "worse than the original" in verdict["reasons"][-1]


def test_the_fused_swaps_pass_through_their_cpu_reference_paths(contracts: dict[str, Any]) -> None:
    swaps = {r["replacement"]: r for r in contracts["swaps"]}
    assert set(swaps) == {"npu_rms_norm (swap_rms_norm)", "npu_swiglu (swap_swiglu)", "npu_rotary_mul (install_rotary)"}
    assert all(r["accepted"] and r["samples"] >= standard.MIN_SAMPLES for r in swaps.values()), swaps


def test_every_decomposition_the_gap_report_proposes_passes_the_contract(contracts: dict[str, Any]) -> None:
    from ascendbridge.operators.gaps import DECOMPOSITIONS

    judged = {r["replacement"]: r for r in contracts["decompositions"]}
    assert set(judged) == set(DECOMPOSITIONS)  # every proposal is code the contract has judged
    assert all(r["accepted"] and r["samples"] >= standard.MIN_SAMPLES for r in judged.values()), judged
    wrong = contracts["unscaled_attention"]
    assert not wrong["accepted"] and wrong["failed"] > 0


def test_a_run_too_small_or_without_edge_inputs_is_refused(contracts: dict[str, Any]) -> None:
    assert contracts["few"]["accepted"] and contracts["few"]["samples"] == standard.MIN_SAMPLES
    sample = {
        "index": 0,
        "kind": "normal",
        "dtype": "float32",
        "shape": "[4]",
        "max_abs": 0.0,
        "mere": 0.0,
        "mare": 0.0,
        "rmse": 0.0,
        "within_share": 1.0,
        "finite": True,
    }
    verdict = standard.judge([dict(sample, index=i) for i in range(10)])
    assert not verdict["accepted"]
    assert verdict["reasons"] == ["10 samples (< 50)", "no non_contiguous, zeros, tiny, large inputs"]
    bad = dict(sample, within_share=0.98, mere=1.0)
    assert standard.sample_problems(bad) == ["98.00% of elements within atol + rtol (< 99%)", "MERE 1 > 0.0001"]
    assert standard.sample_problems(dict(bad, baseline=dict(bad))) == []  # no worse than what it replaces
