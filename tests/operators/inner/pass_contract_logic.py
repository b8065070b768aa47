"""The optimization passes' replacements through the operator acceptance contract (prints one JSON).

    python pass_contract_logic.py RUNTIME_PARENT

A tiny Llama (head dim 128, inside npu_rotary_mul's limits) is built with the NPU swap passes on the
CPU: the contract judges each swap through the swaps' CPU reference paths before it takes effect.
Refusals are provoked two ways: a norm class the swap's detector picks up by name but whose formula
is not npu_rms_norm's ((1 + weight) scaling), and a deliberately wrong fused operator (the CPU
reference of npu_swiglu / npu_rotary_mul / the attention operators replaced by a wrong formula), run
in another dtype than the right operators' (bfloat16 / float16) so that their verdicts cached earlier
in this process do not stand in for them.
"""

from __future__ import annotations

import json
import sys
from typing import Any

sys.path.insert(0, sys.argv[1])

import torch
from transformers import AutoModelForCausalLM, LlamaConfig

from ab_runtime.ops import acceptance
from ab_runtime.optimize import npu_swaps, passes


class OffsetRMSNorm(torch.nn.Module):
    """An RMSNorm by name that scales by (1 + weight): npu_rms_norm does not compute it."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(hidden) * 0.1)
        self.variance_epsilon = 1e-6

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon) * (1 + self.weight)


def tiny(dtype: torch.dtype, offset_norms: str = "") -> torch.nn.Module:
    heads = dict(hidden_size=256, num_attention_heads=2, num_key_value_heads=1)  # head dim 128, grouped 2:1
    cfg = LlamaConfig(intermediate_size=64, num_hidden_layers=2, vocab_size=64, max_position_embeddings=32, **heads)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa").eval()
    if offset_norms == "final":
        model.model.norm = OffsetRMSNorm(256)
    elif offset_norms == "all":
        for name, module in list(model.named_modules()):
            if type(module).__name__ == "LlamaRMSNorm":
                parent, _, leaf = name.rpartition(".")
                setattr(model.get_submodule(parent), leaf, OffsetRMSNorm(256))
    return model.to(dtype)


def swapped(model: torch.nn.Module) -> dict[str, int]:
    """Modules whose forward a swap replaced (an instance attribute), per class."""
    out: dict[str, int] = {}
    for module in model.modules():
        if "forward" in module.__dict__:
            out[type(module).__name__] = out.get(type(module).__name__, 0) + 1
    return out


def build(name: str, model: torch.nn.Module, dtype: torch.dtype) -> dict[str, Any]:
    try:
        with npu_swaps.cpu_reference_ops():  # the decode swap reads the operator's scale keyword when installed
            b = passes.build(model, passes.get([name]), "npu", dtype)
    except acceptance.ReplacementRefused as exc:
        return {"refused": str(exc), "swapped": swapped(model), "attention": model.config._attn_implementation}
    return {
        "notes": b.notes,
        "acceptance": b.acceptance,
        "swapped": swapped(b.model),
        "contexts": len(b.contexts),
        "attention": b.model.config._attn_implementation,
    }


def wrong_swiglu(x: torch.Tensor, dim: int = -1) -> torch.Tensor:  # silu on the wrong half
    a, b = x.chunk(2, dim=dim)
    return a * torch.nn.functional.silu(b)


def wrong_rotary(x: torch.Tensor, r1: torch.Tensor, r2: torch.Tensor, rotary_mode: str = "half") -> torch.Tensor:
    x1, x2 = x.chunk(2, -1)
    return r1 * x + r2 * torch.cat((x2, -x1), dim=-1)  # rotated the other way


def unscaled_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Any, scale: float) -> torch.Tensor:
    return right["_attention"](q, k, v, mask, 1.0)  # the softmax scale dropped


out: dict[str, Any] = {}
f32 = torch.float32
for name in ("npu_rms_norm", "npu_swiglu", "npu_rotary_mul"):
    out[name] = build(name, tiny(f32), f32)
    out[name + "_again"] = build(name, tiny(f32), f32)
out["mixed_norms"] = build("npu_rms_norm", tiny(f32, "final"), f32)
out["offset_norms_only"] = build("npu_rms_norm", tiny(f32, "all"), f32)
bf16, f16 = torch.bfloat16, torch.float16
for name in ("npu_fusion_attention", "npu_fused_infer_attention"):  # fp16 / bf16 operators
    out[name] = build(name, tiny(bf16), bf16)
right = {**vars(npu_swaps.CPU_REFERENCE), "_attention": npu_swaps._reference_attention}
npu_swaps.CPU_REFERENCE.npu_swiglu, npu_swaps.CPU_REFERENCE.npu_rotary_mul = wrong_swiglu, wrong_rotary
npu_swaps._reference_attention = unscaled_attention
out["wrong_swiglu"] = build("npu_swiglu", tiny(bf16), bf16)
out["wrong_rotary"] = build("npu_rotary_mul", tiny(bf16), bf16)
for name in ("npu_fusion_attention", "npu_fused_infer_attention"):
    out["wrong_" + name] = build(name, tiny(f16), f16)
npu_swaps._reference_attention = right.pop("_attention")
vars(npu_swaps.CPU_REFERENCE).update(right)
out["standards"] = passes.REPLACEMENT_STANDARD
out["replacing_passes"] = [
    p.name for p in passes.CATALOGUE if p.changes_code or p.kind in ("module_swap", "quantization", "compile", "decode")
]
print(json.dumps(out, default=str))
