"""Every replacement an optimization pass applies goes through the operator acceptance contract
first (ab_runtime/optimize/passes.py, ab_runtime/ops/acceptance.py swap_verdict / rotary_verdict):
the NPU swaps are judged on the CPU through their CPU reference paths, once per replacement, module
class and dtype per process; a class the contract refuses is not swapped, and a pass with nothing
accepted is not applied (ReplacementRefused, the search row's reason). The passes judged by the
optimization accuracy budget instead are listed, and every pass that replaces computation is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ab_runtime.ops import standard
from ascendbridge.config import REPO_ROOT
from bench.support.torch_env import run_inner_json

INNER = Path(__file__).resolve().parent / "inner" / "pass_contract_logic.py"


@pytest.fixture(scope="module")
def built() -> dict[str, Any]:
    return run_inner_json(INNER, str(REPO_ROOT))


@pytest.mark.parametrize(
    "name, module_class, swapped",
    [("npu_rms_norm", "LlamaRMSNorm", {"LlamaRMSNorm": 5}), ("npu_swiglu", "LlamaMLP", {"LlamaMLP": 2})],
)
def test_a_swap_is_judged_once_per_class_and_dtype_then_applied(
    built: dict[str, Any], name: str, module_class: str, swapped: dict[str, int]
) -> None:
    first, again = built[name], built[name + "_again"]
    assert first["swapped"] == swapped == again["swapped"]
    [verdict] = first["acceptance"]
    assert verdict["judged"].endswith("." + module_class) and verdict["dtype"] == "float32" and verdict["accepted"]
    assert verdict["samples"] >= standard.MIN_SAMPLES and not verdict["cached"] and verdict["device"] == "cpu"
    assert again["acceptance"][0]["cached"] and again["acceptance"][0]["seconds"] == verdict["seconds"]


def test_the_rotary_patch_takes_effect_only_once_accepted(built: dict[str, Any]) -> None:
    rotary = built["npu_rotary_mul"]
    assert rotary["contexts"] == 1 and rotary["acceptance"][0]["accepted"]
    assert rotary["acceptance"][0]["judged"] == "transformers.models.llama.modeling_llama.apply_rotary_pos_emb"
    assert "apply_rotary_pos_emb refused" in built["wrong_rotary"]["refused"]


@pytest.mark.parametrize("name", ["npu_fusion_attention", "npu_fused_infer_attention"])
def test_an_attention_swap_is_judged_and_a_wrong_one_puts_the_attention_back(built: dict[str, Any], name: str) -> None:
    assert built[name]["attention"].startswith("ab_npu_") and "refused" not in built[name]
    if name == "npu_fusion_attention":
        [verdict] = built[name]["acceptance"]
        assert verdict["accepted"] and verdict["judged"].endswith(".LlamaAttention") and verdict["dtype"] == "bfloat16"
    wrong = built["wrong_" + name]
    assert wrong["refused"].startswith(f"{name}: LlamaAttention attention refused") and wrong["attention"] == "sdpa"


def test_a_class_the_contract_refuses_keeps_its_own_code(built: dict[str, Any]) -> None:
    mixed = built["mixed_norms"]
    assert mixed["swapped"] == {"LlamaRMSNorm": 4}  # the OffsetRMSNorm final norm is left as it was
    verdicts = {v["judged"].rpartition(".")[2]: v for v in mixed["acceptance"]}
    assert verdicts["LlamaRMSNorm"]["accepted"] and not verdicts["OffsetRMSNorm"]["accepted"]
    assert "OffsetRMSNorm refused by the operator acceptance contract" in mixed["notes"][0]


@pytest.mark.parametrize(
    "case, what",
    [("offset_norms_only", "npu_rms_norm: OffsetRMSNorm refused"), ("wrong_swiglu", "npu_swiglu: LlamaMLP refused")],
)
def test_a_pass_with_nothing_accepted_is_not_applied(built: dict[str, Any], case: str, what: str) -> None:
    assert built[case]["refused"].startswith(what) and built[case]["swapped"] == {}
    assert "samples fail" in built[case]["refused"] and "worse than the original" in built[case]["refused"]


def test_every_replacing_pass_names_its_standard(built: dict[str, Any]) -> None:
    standards = built["standards"]
    assert set(built["replacing_passes"]) <= set(standards)
    assert {n for n, s in standards.items() if s == "contract"} == {
        "npu_rms_norm",
        "npu_swiglu",
        "npu_rotary_mul",
        "npu_fusion_attention",
        "npu_fused_infer_attention",
    }
    assert standards["cpu_int8_dynamic"] == "budget"
