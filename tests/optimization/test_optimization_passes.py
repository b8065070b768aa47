"""The pass catalogue: applicability per device and model, and construction of every pass.

NPU and CUDA passes are NOT MEASURED here (no such device): their rules are evaluated with
device traits set to npu/cuda, the NPU module swaps are built against FakeTorchNpu (pure-torch
doubles of the documented torch_npu operators, tests/optimization/inner/pass_logic.py) and must
reproduce the original model's outputs while actually calling the fused operator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ascendbridge.config import REPO_ROOT
from bench.support.torch_env import run_inner_json

INNER = Path(__file__).resolve().parent / "inner" / "pass_logic.py"


@pytest.fixture(scope="module")
def logic(python: Path) -> dict[str, Any]:
    return run_inner_json(INNER, str(REPO_ROOT), python=python)


def test_catalogue_covers_every_device(logic: dict[str, Any]) -> None:
    by_device: dict[str, set[str]] = {}
    for p in logic["catalogue"]:
        by_device.setdefault(p["device"], set()).add(p["name"])
    assert {
        "cpu_compile",
        "cpu_int8_dynamic",
        "cpu_threads_1",
        "cpu_channels_last",
        "cpu_bf16_autocast",
        "cpu_bf16_cast",
    } <= by_device["cpu"]
    assert {"cuda_fp16", "cuda_bf16", "cuda_sdpa", "cuda_compile_cudagraphs", "cuda_tf32"} <= by_device["cuda"]
    assert {
        "npu_task_queue",
        "npu_jit_compile_off",
        "npu_fp16",
        "npu_bf16",
        "npu_rms_norm",
        "npu_swiglu",
        "npu_rotary_mul",
        "npu_fusion_attention",
        "npu_torchair_compile",
    } <= by_device["npu"]
    assert len({p["name"] for p in logic["catalogue"]}) == len(logic["catalogue"])


def test_cpu_applicability(logic: dict[str, Any]) -> None:
    a = logic["applies"]
    assert a["llama_cpu_fast_bf16"]["cpu_bf16_cast"] is None and a["llama_cpu_fast_bf16"]["cpu_int8_dynamic"] is None
    assert "no faster than fp32" in a["llama_cpu_slow_bf16"]["cpu_bf16_autocast"]  # no native bf16 either
    assert "already runs in bfloat16" in a["llama_cpu_bf16_baseline"]["cpu_bf16_cast"]
    assert "no convolution" in a["llama_cpu_fast_bf16"]["cpu_channels_last"]
    assert a["vit_cpu"]["cpu_channels_last"] is None
    # native bf16 instructions make the bf16 passes apply even when the GEMM micro-benchmark shows no gain
    assert (
        a["llama_cpu_native_bf16"]["cpu_bf16_cast"] is None and a["llama_cpu_native_bf16"]["cpu_bf16_autocast"] is None
    )


@pytest.mark.parametrize("branch", ["native", "none"])
def test_cpu_bf16_probe_can_be_forced(logic: dict[str, Any], branch: str) -> None:
    """ASCENDBRIDGE_CPU_BF16 decides the probe and the traits, and skips the GEMM micro-benchmark."""
    forced = logic["probe"][branch]
    assert forced == {"native": branch == "native", "traits_native": branch == "native", "gemm_speedup": None}
    assert logic["probe"]["bad"] == "ASCENDBRIDGE_CPU_BF16 must be one of native, none (or unset), got 'avx512'"


def test_npu_applicability_not_measured(logic: dict[str, Any]) -> None:
    fp32, bf16, vit = (
        logic["applies"]["llama_npu_fp32"],
        logic["applies"]["llama_npu_bf16"],
        logic["applies"]["vit_npu_bf16"],
    )
    assert fp32["npu_rms_norm"] is None and fp32["npu_swiglu"] is None and fp32["npu_rotary_mul"] is None
    assert "fp16/bf16 only" in fp32["npu_fusion_attention"]
    assert bf16["npu_fusion_attention"] is None and "already runs" in bf16["npu_bf16"]
    assert "no plain RMSNorm" in vit["npu_rms_norm"] and "no HF apply_rotary_pos_emb" in vit["npu_rotary_mul"]


@pytest.mark.parametrize(
    "name, op, calls",
    [
        ("npu_rms_norm", "npu_rms_norm", 5),
        ("npu_swiglu", "npu_swiglu", 2),
        ("npu_rotary_mul", "npu_rotary_mul", 4),
        ("npu_fusion_attention", "npu_fusion_attention", 2),
    ],
)
def test_npu_swaps_call_the_fused_op_and_keep_outputs(logic: dict[str, Any], name: str, op: str, calls: int) -> None:
    swap = logic["swaps"][name]
    assert swap["calls"] == {op: calls}
    bound = 0.02 * swap["scale"] if name == "npu_fusion_attention" else 1e-5  # bf16 rounding vs exact fp32
    assert swap["max_abs_diff"] <= bound


def test_rotary_patch_is_off_for_the_baseline(logic: dict[str, Any]) -> None:
    assert logic["swaps"]["npu_rotary_mul"]["calls_from_unoptimized_model"] == {}


def test_cuda_and_env_passes_construct_not_measured(logic: dict[str, Any]) -> None:
    c = logic["cuda"]
    assert c["cuda_fp16"]["param_dtype"] == "torch.float16" and c["cuda_fp16"]["accuracy_dtype"] == "float16"
    assert c["cuda_bf16"]["param_dtype"] == "torch.bfloat16"
    assert c["cuda_sdpa"]["attn"] == "sdpa"
    assert c["cuda_tf32"]["contexts"] == 1
    assert c["cuda_compile_cudagraphs"]["compile"] == {"backend": "inductor", "mode": "reduce-overhead"}
    assert logic["npu_task_queue_env"] == {"TASK_QUEUE_ENABLE": "2"}


def test_fusion_attention_uses_native_gqa_and_the_compressed_causal_mask(logic: dict[str, Any]) -> None:
    swap = logic["swaps"]["npu_fusion_attention"]
    assert swap["padded_call"]["q_heads"] == 4 and swap["padded_call"]["kv_heads"] == 2  # no key/value repetition
    assert swap["padded_call"]["sparse_mode"] == 0 and swap["padded_call"]["mask_shape"] == [2, 1, 12, 12]
    # no padding: transformers' sdpa default (causal) through sparse_mode 2 and the documented 2048 x 2048 mask
    assert swap["causal_call"] == {"q_heads": 4, "kv_heads": 2, "sparse_mode": 2, "mask_shape": [2048, 2048]}
    assert swap["causal_max_abs_diff"] <= 0.02 * swap["scale"]


def test_fusion_attention_falls_back_for_soft_capping_and_sinks(logic: dict[str, Any]) -> None:
    assert logic["swaps"]["npu_fusion_attention"]["fused_calls_with_softcap_or_sinks"] == 0


def test_jit_compile_mode_is_restored_to_what_it_was(logic: dict[str, Any]) -> None:
    """Restoring a hard-coded True ran the interleaved baseline in another mode than before."""
    assert logic["jit"]["True"] == {"inside": False, "after": True}
    assert logic["jit"]["False"] == {"inside": False, "after": False}


def test_rotary_swap_checks_the_documented_head_dim(logic: dict[str, Any]) -> None:
    assert "head dim 128 only, got 64" in logic["rotary_head_dim_64"]
