"""Decode passes (ab_runtime.optimize.decode_passes): selection, fallback, greedy-token gating.

cpu_static_cache_compile really runs here (static KV cache + torch.compile, inductor) and must
reproduce eager greedy generation token for token. NPU and CUDA decode passes are NOT MEASURED
(no such device): their applicability is evaluated with device choices set to npu/cuda, and the NPU
passes run against test doubles of torch_npu / torchair that follow the documented APIs
(tests/optimization/inner/decode_logic.py), so graph capture and the attention swap are real code
paths on CPU while no NPU figure is ever produced. Inductor's cache lives in .cache/torchinductor,
so a repeated run does not rebuild the C++ kernels.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ascendbridge.config import REPO_ROOT
from bench.support.torch_env import run_inner_json

INNER = Path(__file__).resolve().parent / "inner" / "decode_logic.py"
DEMO_LLAMA = REPO_ROOT / "demo_models" / "tiny-llama" / "config.json"
DECODE_PASSES = {
    "cpu_static_cache_compile",
    "cuda_static_cache_compile",
    "cuda_static_cache_cudagraphs",
    "npu_static_cache_torchair",
    "npu_static_cache_aclgraph",
    "npu_fused_infer_attention",
}


@pytest.fixture(scope="module")
def decode(python: Path) -> dict[str, Any]:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(REPO_ROOT / ".cache" / "torchinductor")}
    return run_inner_json(INNER, str(REPO_ROOT), str(DEMO_LLAMA), python=python, timeout=900, env=env)


def test_static_cache_compile_runs_on_cpu_and_matches_eager_token_for_token(decode: dict[str, Any]) -> None:
    cpu = decode["cpu_static"]
    assert cpu["forward_compiled"] and cpu["kwargs"]["cache_implementation"] == "static"
    assert cpu["agreement"] == {
        "match_rate": 1.0,
        "first_divergence": None,
        "per_row_first_divergence": [None, None],
        "compared": 8,
    }
    assert cpu["verdict"]["verdict"] == "pass" and cpu["verdict"]["rule"] == "generation-greedy/1"


def test_selection_by_device_and_documented_limits(decode: dict[str, Any]) -> None:
    assert [n for n, why in decode["applies_cpu"].items() if why is None] == ["cpu_static_cache_compile"]
    assert {n for n, why in decode["applies_cuda"].items() if why is None} == {
        "cuda_static_cache_compile",
        "cuda_static_cache_cudagraphs",
    }
    assert decode["applies_cpu"]["npu_fused_infer_attention"] == "npu pass; this run is on cpu"
    assert decode["too_long"] == "prompt + new tokens = 260 exceed max_position_embeddings 256"
    # no torch_npu here: the NPU passes say so instead of failing
    bare = decode["applies_npu_bare"]
    assert "torch_npu cannot be imported" in bare["npu_fused_infer_attention"]
    assert "torchair cannot be imported" in bare["npu_static_cache_aclgraph"]
    # with the doubles, on an Atlas A2 chip name, in bf16
    assert {n for n, why in decode["applies_npu"].items() if why is None} == {
        "npu_static_cache_torchair",
        "npu_static_cache_aclgraph",
        "npu_fused_infer_attention",
    }
    assert "fp16/bf16" in decode["applies_npu_fp32"]
    assert "head dim 1024" in decode["applies_npu_wide"]
    assert "Atlas A2 / A3" in decode["aclgraph_310p"]
    assert "has no `mode`" in decode["aclgraph_no_mode"]


def test_aclgraph_pass_captures_the_static_cache_decode_through_the_npu_backend(decode: dict[str, Any]) -> None:
    acl = decode["aclgraph"]
    assert acl["modes"] == ["reduce-overhead"] and acl["graphs"] == 2  # prefill and decode graphs
    assert acl["kwargs"]["cache_implementation"] == "static"
    assert acl["agreement"]["match_rate"] == 1.0


@pytest.mark.parametrize("keyword", ["scale", "scale_value"])
def test_fused_infer_attention_follows_the_installed_signature(decode: dict[str, Any], keyword: str) -> None:
    row = decode["fused"][keyword]
    assert row["detected"] == keyword and row["applies"] is None
    assert row["calls"] == 3  # decode steps only (4 new tokens, 1 from prefill), one layer
    assert row["agreement"]["first_divergence"] is None and row["attn"] == "ab_npu_fused_infer_attention"
    assert "neither `scale` (7.0.0) nor `scale_value` (6.0.0)" in decode["fused"]["None"]["applies"]


def test_greedy_comparison_and_its_rule(decode: dict[str, Any]) -> None:
    assert decode["divergence"] == {
        "match_rate": 0.75,
        "first_divergence": 3,
        "per_row_first_divergence": [None, 3],
        "compared": 12,
    }
    assert decode["divergence_short"]["first_divergence"] == 4  # a candidate that stopped early
    assert decode["verdicts"] == {"1.0": "pass", "0.9": "pass", "0.75": "fail"}
    assert decode["verdict_strict"] == "fail"  # tolerances.optimization.top1_agreement_min = 1.0
    assert decode["bad_shape"].startswith("token_agreement needs two (batch, tokens) tensors")
    assert decode["clash"] == "decode passes of one group cannot combine: decode_graph"
    assert decode["unknown"].startswith("unknown decode pass(es): no_such_pass")


def test_decode_passes_are_in_the_pass_listing(decode: dict[str, Any]) -> None:
    listed = {r["name"]: r for r in decode["listing"]}
    assert set(listed) == DECODE_PASSES
    assert all(r["documented"] and r["kind"] == "decode" for r in listed.values())
    assert len(set(decode["listing_names"])) == len(decode["listing_names"])
    assert "reduce-overhead = CUDA graphs" in listed["cuda_static_cache_cudagraphs"]["summary"]


def test_fused_attention_runs_inside_the_captured_decode_graph(decode: dict[str, Any]) -> None:
    """torchair graph + fused attention combined: the swap is traced into the full-graph capture
    (its release keyword resolved at swap time, nothing inspected per call) and tokens still match."""
    both = decode["combined"]
    assert both["graphs"] == 2 and both["modes"] == ["max-autotune"]
    assert both["attn"] == "ab_npu_fused_infer_attention" and both["agreement"]["match_rate"] == 1.0
