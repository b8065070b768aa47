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

from .checkpoint import QuantCheckpoint

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


def build_reference_model(model_dir: Path, ckpt: QuantCheckpoint) -> nn.Module:
    """The float model's architecture, loaded from the checkpoint only: float tensors as saved (the
    tool may have folded smoothing factors into norms), quantized linears by reference."""
    problems = ckpt.problems()
    if problems:
        raise ValueError(f"{ckpt.directory}: inconsistent checkpoint: {problems[0]} (+{len(problems) - 1} more)")
    import transformers

    config = transformers.AutoConfig.from_pretrained(str(model_dir))
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    linears = ckpt.linears()
    missing, _ = model.load_state_dict(ckpt.float_tensors(), strict=False)
    covered = {f"{m}.weight" for m in linears} | {f"{m}.bias" for m in linears}
    uncovered = [k for k in missing if k not in covered]
    if uncovered:
        raise ValueError(
            f"{ckpt.directory}: the checkpoint has no tensor for {uncovered[0]} (+{len(uncovered) - 1} more)"
        )
    for module_name, linear in linears.items():
        parent_name, _, child = module_name.rpartition(".")
        parent = model.get_submodule(parent_name)
        setattr(
            parent,
            child,
            ReferenceQuantLinear(linear.weight, linear.scale, linear.bias, quantize_input=linear.quantize_input),
        )
    return model
