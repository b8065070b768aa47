"""The reference forward of a quantized checkpoint: the model built from its config, every
quantized linear replaced by one that computes from the saved int8 weight and per-channel scale.

W8A8_DYNAMIC quantizes each token's activations to int8 at run time (symmetric, scale = the
token's max |x| / 127), as vLLM-Ascend's dynamic W8A8 kernels do; W8A16 keeps activations in the
model's dtype. The product is computed in float32 from the dequantized operands: this is the
numerical definition of the format, not a fast kernel.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from .ascend_format import AscendCheckpoint, check_checkpoint

INT8_MAX = 127.0


def quantize_per_token(x: torch.Tensor) -> torch.Tensor:
    """x rounded to symmetric int8 per token (last dim) and scaled back."""
    scale = x.abs().amax(dim=-1, keepdim=True).clamp_min(torch.finfo(torch.float32).tiny) / INT8_MAX
    return torch.clamp(torch.round(x / scale), -INT8_MAX - 1, INT8_MAX) * scale


class ReferenceQuantLinear(nn.Module):
    """y = q(x) @ (W_int8 * scale)^T + b, with q per-token int8 (W8A8) or the identity (W8A16)."""

    def __init__(self, weight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None, quantize_input: bool):
        super().__init__()
        self.register_buffer("weight", (weight.to(torch.float32) * scale.to(torch.float32)), persistent=False)
        self.bias = None if bias is None else nn.Parameter(bias.to(torch.float32), requires_grad=False)
        self.quantize_input = quantize_input

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.to(torch.float32)
        if self.quantize_input:
            x32 = quantize_per_token(x32)
        return nn.functional.linear(x32, self.weight, self.bias).to(x.dtype)


def build_reference_model(model_dir: Path, ckpt: AscendCheckpoint) -> nn.Module:
    """The float model's architecture, loaded from the checkpoint only: float tensors as saved (the
    tool may have folded smoothing factors into norms), quantized linears by reference."""
    problems = check_checkpoint(ckpt)
    if problems:
        raise ValueError(f"{ckpt.directory}: inconsistent checkpoint: {problems[0]} (+{len(problems) - 1} more)")
    import transformers

    config = transformers.AutoConfig.from_pretrained(str(model_dir))
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    quantized = ckpt.quantized_linears()
    float_state = {k: v for k, v in ckpt.tensors.items() if ckpt.kinds.get(k) == "FLOAT"}
    missing, _ = model.load_state_dict(float_state, strict=False)
    covered = {f"{m}.weight" for m in quantized} | {f"{m}.bias" for m in quantized}
    uncovered = [k for k in missing if k not in covered]
    if uncovered:
        raise ValueError(
            f"{ckpt.directory}: the checkpoint has no tensor for {uncovered[0]} (+{len(uncovered) - 1} more)"
        )
    for module_name in quantized:
        parent_name, _, child = module_name.rpartition(".")
        parent = model.get_submodule(parent_name)
        kind = ckpt.kinds[f"{module_name}.weight"]
        setattr(
            parent,
            child,
            ReferenceQuantLinear(
                ckpt.tensors[f"{module_name}.weight"],
                ckpt.tensors[f"{module_name}.weight_scale"],
                ckpt.tensors.get(f"{module_name}.bias"),
                quantize_input=kind == "W8A8_DYNAMIC",
            ),
        )
    return model
