"""What the reference forward needs of a quantized checkpoint, whichever format saved it
(formats.py tells them apart by their files):

- msModelSlim's ascendv1 (`quant_model_description.json`; ascend_format.py), what vLLM-Ascend
  loads with `--quantization ascend`;
- compressed-tensors (`config.json` with `quantization_config.quant_method: compressed-tensors`;
  ct_format.py), what LLM-Compressor saves and vLLM loads with its `compressed-tensors` method.

Both store a quantized linear as an int8 weight [out, in] with a float scale per output channel
[out, 1]; `problems()` lists every way a checkpoint disagrees with its own description (a refusal:
nothing is computed from it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch
from safetensors.torch import load_file


@dataclass(frozen=True)
class QuantLinear:
    """One quantized linear as saved: y = q(x) @ (weight * scale)^T + bias, q per-token int8 or not."""

    weight: torch.Tensor  # int8 [out, in]
    scale: torch.Tensor  # float [out, 1]
    bias: torch.Tensor | None
    quantize_input: bool  # activations rounded to int8 per token at run time (W8A8) or kept (W8A16)


class QuantCheckpoint(Protocol):
    @property
    def directory(self) -> Path: ...

    @property
    def quant_type(self) -> str:
        """The scheme the checkpoint declares: its row of ab_runtime/quant/standard.py."""
        ...

    def problems(self) -> list[str]: ...

    def float_tensors(self) -> dict[str, torch.Tensor]: ...

    def linears(self) -> dict[str, QuantLinear]: ...

    def weight_bytes(self) -> int: ...


class CheckpointError(ValueError):
    """The directory is not a readable quantized checkpoint (missing files, unreadable JSON)."""


def read_json(path: Path) -> dict[str, object]:
    try:
        value = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: not readable JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise CheckpointError(f"{path}: not a JSON object")
    return value


def load_shards(directory: Path, pattern: str, beside: str) -> dict[str, torch.Tensor]:
    """Every tensor of the shards matching `pattern`; CheckpointError when there is none beside `beside`."""
    shards = sorted(directory.glob(pattern))
    if not shards:
        raise CheckpointError(f"{directory}: no {pattern} beside {beside}")
    tensors: dict[str, torch.Tensor] = {}
    for shard in shards:
        tensors.update(load_file(str(shard)))
    return tensors


def linear_of(tensors: dict[str, torch.Tensor], module: str, quantize_input: bool) -> QuantLinear:
    """The quantized linear `module` as saved: `.weight`, `.weight_scale` and `.bias` when there is one."""
    return QuantLinear(
        tensors[f"{module}.weight"], tensors[f"{module}.weight_scale"], tensors.get(f"{module}.bias"), quantize_input
    )
