"""Comparator verdicts on constructed cases, computed by the real comparator in a torch env."""

from __future__ import annotations

import json

import pytest

from ascendbridge.config import REPO_ROOT
from ascendbridge.gatekit.compare import recorded_matches
from bench.support.torch_env import run_inner_json

CASES = r"""
import json, sys, importlib.util
from collections import OrderedDict
import torch
spec = importlib.util.spec_from_file_location("cmp", sys.argv[1])
cmp = importlib.util.module_from_spec(spec); sys.modules["cmp"] = cmp; spec.loader.exec_module(cmp)
from transformers.modeling_outputs import SequenceClassifierOutput
T = cmp.Thresholds()
g = torch.Generator().manual_seed(0)
ref = torch.randn(4, 16, 32, generator=g)
f64 = ref.double() + 1e-9 * torch.randn(ref.shape, generator=g, dtype=torch.float64)
out = {}
out["identical"] = cmp.compare_outputs({"x": ref.clone()}, {"x": ref}, T, "float32", {"x": f64})
out["fp32_perturbed"] = cmp.compare_outputs({"x": ref + 1e-6 * torch.randn(ref.shape, generator=g)}, {"x": ref}, T, "float32")
out["fp32_too_far"] = cmp.compare_outputs({"x": ref + 1e-2 * torch.randn(ref.shape, generator=g)}, {"x": ref}, T, "float32")
out["bf16_rounded"] = cmp.compare_outputs({"x": ref.to(torch.bfloat16)}, {"x": ref}, T, "bfloat16", {"x": f64})
out["bf16_noise"] = cmp.compare_outputs({"x": (ref + 0.3 * torch.randn(ref.shape, generator=g)).to(torch.bfloat16)}, {"x": ref}, T, "bfloat16")
bad = ref.clone(); bad[0, 0, 0] = float("nan")
out["nan"] = cmp.compare_outputs({"x": bad}, {"x": ref}, T, "float32")
out["wrong_shape"] = cmp.compare_outputs({"x": ref[:, :8]}, {"x": ref}, T, "float32")
out["missing"] = cmp.compare_outputs({"y": ref}, {"x": ref}, T, "float32")
nested_t = SequenceClassifierOutput(logits=ref[:, 0, :3].clone(), hidden_states=(ref.clone(), ref.clone() * 2))
nested_r = SequenceClassifierOutput(logits=ref[:, 0, :3], hidden_states=(ref, ref * 2))
out["nested"] = cmp.compare_outputs(nested_t, nested_r, T, "float32")
nested_bad = SequenceClassifierOutput(logits=ref[:, 0, :3], hidden_states=(ref, ref * -2))
out["nested_bad"] = cmp.compare_outputs(nested_bad, nested_r, T, "float32")
out["dict_tuple"] = cmp.compare_outputs({"a": (ref, {"b": ref})}, {"a": (ref, {"b": ref})}, T, "float32")
labels = torch.arange(100) % 7
flip = labels.clone(); flip[:5] = (flip[:5] + 1) % 7
out["labels_equal"] = cmp.compare_outputs({"pred": labels.clone()}, {"pred": labels}, T, "float32")
out["labels_flip_fp32"] = cmp.compare_outputs({"pred": flip}, {"pred": labels}, T, "float32")
out["labels_flip_bf16"] = cmp.compare_outputs({"pred": flip}, {"pred": labels}, T, "bfloat16")
out["label_vs_float"] = cmp.compare_outputs({"pred": labels.float()}, {"pred": labels}, T, "float32")
worse = ref + 1e-3 * torch.randn(ref.shape, generator=g)
loose = cmp.Thresholds.from_spec({"float32": {"cosine_min": 0.999, "max_abs_err_scaled_max": 4e-3}})
out["dynamo_worse_than_baseline"] = cmp.compare_outputs({"x": worse}, {"x": ref}, loose, "float32", {"x": f64})
out["from_spec"] = cmp.Thresholds.from_spec({"bfloat16": {"cosine_min": 0.985}}).for_dtype("bfloat16")
noisy = {"x": (ref + 0.3 * torch.randn(ref.shape, generator=g)).to(torch.bfloat16)}
out["hand_loosened_flat"] = cmp.compare_outputs(noisy, {"x": ref}, cmp.Thresholds.from_spec({"cosine_min": 0.0, "max_abs_err_scaled": 10.0}), "bfloat16")
out["hand_loosened"] = cmp.compare_outputs(noisy, {"x": ref}, cmp.Thresholds.from_spec({"bfloat16": {"cosine_min": 0.5, "max_abs_err_scaled_max": 10.0}}), "bfloat16")
# Logits with near-ties: bf16 rounding keeps cosine and max error inside the bf16 standard, but the
# predicted token changes almost everywhere; the optimization budget (vs fp32) catches it.
ties = 100.0 + 1e-3 * torch.randn(4, 16, 32, generator=g)
out["ties_bf16_standard"] = cmp.compare_outputs({"logits": ties.to(torch.bfloat16)}, {"logits": ties}, T, "bfloat16")
out["ties_budget"] = cmp.judge_optimized({"logits": ties.to(torch.bfloat16)}, {"logits": ties}, "causal_lm", "bfloat16")
out["budget_rounded"] = cmp.judge_optimized({"logits": ref.to(torch.bfloat16)}, {"logits": ref}, "causal_lm", "bfloat16")
out["budget_embeddings"] = cmp.judge_optimized({"x": ref.to(torch.bfloat16)}, {"x": ref}, "feature_extraction", "bfloat16")
out["budget_tightened"] = cmp.judge_optimized({"logits": ref.to(torch.bfloat16)}, {"logits": ref}, "causal_lm", "bfloat16", {"optimization": {"cosine_min": 0.999999}})
out["budget_loosened"] = cmp.judge_optimized({"logits": ties.to(torch.bfloat16)}, {"logits": ties}, "causal_lm", "bfloat16", {"optimization": {"top1_agreement_min": 0.0}})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict:
    script = tmp_path_factory.mktemp("cmp") / "cases.py"
    script.write_text(CASES)
    comparator = REPO_ROOT / "ab_runtime" / "comparator.py"
    return run_inner_json(script, str(comparator), timeout=300)


def test_identical_outputs_pass_with_float64_rule(verdicts: dict) -> None:
    r = verdicts["identical"]
    assert r["verdict"] == "pass" and r["float64_reference"] is True
    m = r["outputs"]["x"]["metrics"]
    assert m["cosine"] == pytest.approx(1.0) and m["max_abs_err"] == 0.0 and "rmse_vs_fp64" in m
    assert r["thresholds"]["applied"]["cosine_min"] == 0.9999  # fp32 is stricter


def test_slight_perturbation_passes_and_large_one_fails(verdicts: dict) -> None:
    assert verdicts["fp32_perturbed"]["verdict"] == "pass"
    too_far = verdicts["fp32_too_far"]
    assert too_far["verdict"] == "fail" and too_far["failed_outputs"] == ["x"]
    assert any("max abs err" in r for r in too_far["outputs"]["x"]["reasons"])


def test_bf16_rounding_passes_with_dtype_aware_bounds_but_noise_fails(verdicts: dict) -> None:
    ok = verdicts["bf16_rounded"]
    assert ok["verdict"] == "pass", ok["outputs"]["x"]["reasons"]
    assert ok["thresholds"]["applied"]["cosine_min"] == 0.99
    assert ok["outputs"]["x"]["dtype"] == "bfloat16"
    noisy = verdicts["bf16_noise"]
    assert noisy["verdict"] == "fail"
    assert any("cosine" in r for r in noisy["outputs"]["x"]["reasons"])


def test_nan_fails(verdicts: dict) -> None:
    r = verdicts["nan"]
    assert r["verdict"] == "fail"
    assert r["outputs"]["x"]["reasons"] == ["target has 1 nan/inf values"]


def test_wrong_shape_and_missing_outputs_fail(verdicts: dict) -> None:
    shape = verdicts["wrong_shape"]["outputs"]["x"]
    assert shape["kind"] == "mismatch" and shape["verdict"] == "fail"
    missing = verdicts["missing"]
    assert missing["verdict"] == "fail"
    assert "output 'x' missing from target" in missing["problems"]


def test_nested_model_outputs_are_compared_per_tensor(verdicts: dict) -> None:
    assert set(verdicts["nested"]["outputs"]) == {"logits", "hidden_states.0", "hidden_states.1"}
    assert verdicts["nested"]["verdict"] == "pass"
    assert verdicts["nested_bad"]["failed_outputs"] == ["hidden_states.1"]
    assert set(verdicts["dict_tuple"]["outputs"]) == {"a.0", "a.1.b"}


def test_labels_by_match_rate(verdicts: dict) -> None:
    assert verdicts["labels_equal"]["outputs"]["pred"]["metrics"]["match_rate"] == 1.0
    assert verdicts["labels_flip_fp32"]["verdict"] == "fail"  # fp32 wants every label equal
    bf16 = verdicts["labels_flip_bf16"]
    assert bf16["verdict"] == "pass" and bf16["outputs"]["pred"]["metrics"]["match_rate"] == 0.95
    assert verdicts["label_vs_float"]["outputs"]["pred"]["kind"] == "mismatch"


def test_dynamo_rule_rejects_error_far_above_the_fp32_baseline(verdicts: dict) -> None:
    r = verdicts["dynamo_worse_than_baseline"]["outputs"]["x"]
    assert r["verdict"] == "fail"
    assert len(r["reasons"]) == 1 and r["reasons"][0].startswith("RMSE vs float64")


def test_thresholds_from_spec_and_figure_comparison(verdicts: dict) -> None:
    within = verdicts["from_spec"]
    assert within["cosine_min"] == 0.985 and within["standard"] == "ascendbridge-accuracy/1"
    assert [d["decision"] for d in within["decisions"]] == ["loosened within the framework's bound"]
    rounded = verdicts["bf16_rounded"]  # a real comparison result, through JSON once already
    assert recorded_matches(json.loads(json.dumps(rounded)), rounded)
    tampered = json.loads(json.dumps(rounded))
    tampered["outputs"]["x"]["metrics"]["cosine"] -= 0.001
    assert not recorded_matches(tampered, rounded)


@pytest.mark.parametrize("case", ["hand_loosened_flat", "hand_loosened"])
def test_tolerances_loosened_beyond_the_bounds_do_not_change_the_verdict(verdicts: dict, case: str) -> None:
    """The noisy bf16 output fails the standard; a spec asking for looser thresholds than the
    framework's bounds (old flat keys or per-dtype) is refused, and the refusal is recorded."""
    r = verdicts[case]
    assert r["verdict"] == verdicts["bf16_noise"]["verdict"] == "fail"
    applied = r["thresholds"]["applied"]
    assert (applied["cosine_min"], applied["max_abs_err_scaled_max"]) == (0.99, 0.0625)
    assert applied["decisions"] and all(d["decision"].startswith("refused") for d in applied["decisions"])


def test_precision_passes_are_judged_by_the_optimization_budget_against_fp32(verdicts: dict) -> None:
    """bf16 rounding of near-tied logits passes the bf16 standard, yet changes the top-1 token:
    the optimization budget (named, the same for every pass) fails it."""
    assert verdicts["ties_bf16_standard"]["verdict"] == "pass"
    budget = verdicts["ties_budget"]
    assert budget["verdict"] == "fail" and budget["failed_outputs"] == ["logits"]
    applied = budget["thresholds"]["applied"]
    assert applied["standard"] == "optimization-budget/1" and applied["against"] == "float32 reference"
    assert budget["outputs"]["logits"]["metrics"]["top1_agreement"] < 0.9
    assert any("top-1 agreement" in r for r in budget["outputs"]["logits"]["reasons"])
    ok = verdicts["budget_rounded"]
    assert ok["verdict"] == "pass" and ok["outputs"]["logits"]["metrics"]["top1_agreement"] >= 0.9
    assert "top1_agreement" not in verdicts["budget_embeddings"]["outputs"]["x"]["metrics"]  # cosine only


def test_a_spec_may_only_tighten_the_optimization_budget(verdicts: dict) -> None:
    tight = verdicts["budget_tightened"]
    assert tight["verdict"] == "fail" and tight["thresholds"]["applied"]["cosine_min"] == 0.999999
    assert [d["decision"] for d in tight["thresholds"]["applied"]["decisions"]] == ["tightened"]
    loose = verdicts["budget_loosened"]
    assert loose["verdict"] == "fail" and loose["thresholds"]["applied"]["top1_agreement_min"] == 0.9
    assert loose["thresholds"]["applied"]["decisions"][0]["decision"].startswith("refused")
