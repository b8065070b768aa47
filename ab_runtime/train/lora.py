"""Low-rank adapters (LoRA) on a model's linear layers: the base weights are frozen, only the
adapters train. peft is not in the packages' environments, so the harness carries this small
implementation (Hu et al. 2021: W x + (alpha / r) B A x, A random, B zero, so training starts
from the base model exactly)."""

from __future__ import annotations

import math

import torch
from torch import nn

ADAPTER_MARK = "lora_"


class LoRALinear(nn.Module):
    """A frozen nn.Linear plus its trainable low-rank update."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float) -> None:
        super().__init__()
        self.base = base
        self.scale = alpha / rank
        self.lora_a = nn.Parameter(torch.empty(rank, base.in_features, dtype=base.weight.dtype))
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank, dtype=base.weight.dtype))
        nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (x @ self.lora_a.t() @ self.lora_b.t()) * self.scale


def apply_lora(model: nn.Module, rank: int, alpha: float, targets: tuple[str, ...] = ()) -> list[str]:
    """Wrap the linear layers whose name ends with one of `targets` (all linear layers of the
    transformer blocks when empty; never the output head), freeze everything else; returns the
    wrapped names. Raises ValueError when nothing matched."""
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    chosen = [(name, module) for name, module in model.named_modules()
              if isinstance(module, nn.Linear) and module is not output
              and (any(name.endswith(t) for t in targets) if targets else ".layer" in name or ".h." in name or "layers." in name or "block." in name)]
    if not chosen:
        raise ValueError(f"LoRA found no linear layer to adapt (targets {list(targets) or 'the transformer blocks'})")
    for param in model.parameters():
        param.requires_grad_(False)
    for name, module in chosen:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, LoRALinear(module, rank, alpha))
    return [name for name, _ in chosen]
