"""msModelSlim's `ascendv1` checkpoint (what vLLM-Ascend loads with `--quantization ascend`).

Layout, as msModelSlim 26.1.0's `ascendv1_saver` writes it: `quant_model_description.json` maps
every tensor name to its kind (`FLOAT`, `W8A8_DYNAMIC`, `W8A16`, ...) plus a few top-level keys
(`model_quant_type`, `version`, `group_size`, ...); the tensors live in
`quant_model_weights*.safetensors` (with an index when sharded). A quantized linear `X` has
`X.weight` (int8, [out, in]), `X.weight_scale` and `X.weight_offset` (float, [out, 1]).

check_checkpoint lists every way the description and the tensors disagree: the gate refuses such a
checkpoint before any figure is computed from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from .checkpoint import CheckpointError, QuantLinear, linear_of, load_shards, read_json

DESCRIPTION_FILE = "quant_model_description.json"
# Top-level description keys that describe the checkpoint, not a tensor.
HEADER_KEYS = frozenset({"version", "model_quant_type", "metadata", "group_size", "optional", "kv_cache_type"})
# Tensor kinds the reference forward executes: weight int8 per output channel; activations
# quantized per token at run time (W8A8_DYNAMIC) or kept in the model's dtype (W8A16).
EXECUTED_KINDS = frozenset({"W8A8_DYNAMIC", "W8A16"})
FLOAT_KIND = "FLOAT"


@dataclass(frozen=True)
class AscendCheckpoint:
    """A quantized checkpoint as saved: its description and every tensor."""

    directory: Path
    quant_type: str
    kinds: dict[str, str]  # tensor name -> kind
    tensors: dict[str, torch.Tensor]

    def quantized_linears(self) -> list[str]:
        """Module names whose weight is stored quantized (`model.layers.0.mlp.up_proj`)."""
        suffix = ".weight"
        return sorted(
            name[: -len(suffix)]
            for name, kind in self.kinds.items()
            if name.endswith(suffix) and kind != FLOAT_KIND and f"{name[: -len(suffix)]}.weight_scale" in self.kinds
        )

    def weight_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors.values())

    def problems(self) -> list[str]:
        return check_checkpoint(self)

    def float_tensors(self) -> dict[str, torch.Tensor]:
        """The tensors saved as they are (the tool may have folded smoothing factors into norms)."""
        return {k: v for k, v in self.tensors.items() if self.kinds.get(k) == FLOAT_KIND}

    def linears(self) -> dict[str, QuantLinear]:
        return {
            m: linear_of(self.tensors, m, quantize_input=self.kinds[f"{m}.weight"] == "W8A8_DYNAMIC")
            for m in self.quantized_linears()
        }


def read_checkpoint(directory: Path) -> AscendCheckpoint:
    description_path = directory / DESCRIPTION_FILE
    if not description_path.is_file():
        raise CheckpointError(f"{directory}: no {DESCRIPTION_FILE} (not an msModelSlim ascendv1 checkpoint)")
    description = read_json(description_path)
    tensors = load_shards(directory, "quant_model_weights*.safetensors", DESCRIPTION_FILE)
    kinds = {k: str(v) for k, v in description.items() if k not in HEADER_KEYS}
    return AscendCheckpoint(directory, str(description.get("model_quant_type", "")), kinds, tensors)


def check_checkpoint(ckpt: AscendCheckpoint) -> list[str]:
    """Every disagreement between the description and the tensors, one line each (empty: consistent)."""
    problems = [f"described but not saved: {n}" for n in sorted(set(ckpt.kinds) - set(ckpt.tensors))]
    problems += [f"saved but not described: {n}" for n in sorted(set(ckpt.tensors) - set(ckpt.kinds))]
    for module in ckpt.quantized_linears():
        kind = ckpt.kinds[f"{module}.weight"]
        if kind not in EXECUTED_KINDS:
            problems.append(f"{module}: kind {kind} has no reference forward here (executed: {sorted(EXECUTED_KINDS)})")
            continue
        problems += _check_linear(ckpt, module, kind)
    return problems


def _check_linear(ckpt: AscendCheckpoint, module: str, kind: str) -> list[str]:
    weight = ckpt.tensors.get(f"{module}.weight")
    scale = ckpt.tensors.get(f"{module}.weight_scale")
    offset = ckpt.tensors.get(f"{module}.weight_offset")
    if weight is None or scale is None or offset is None:
        return [f"{module}: {kind} needs weight, weight_scale and weight_offset"]
    problems = []
    if weight.dtype != torch.int8:
        problems.append(f"{module}.weight: {kind} weight is {weight.dtype}, expected torch.int8")
    if weight.dim() != 2 or tuple(scale.shape) != (weight.shape[0], 1) or tuple(offset.shape) != (weight.shape[0], 1):
        problems.append(
            f"{module}: scale {tuple(scale.shape)} / offset {tuple(offset.shape)} do not match weight "
            f"{tuple(weight.shape)} (expected one per output channel)"
        )
    elif not bool(torch.isfinite(scale).all()) or not bool((scale > 0).all()):
        problems.append(f"{module}.weight_scale: not all positive and finite")
    elif bool(offset.ne(0).any()):
        problems.append(f"{module}.weight_offset: non-zero (asymmetric weights have no reference forward here)")
    for name in (f"{module}.weight", f"{module}.weight_scale", f"{module}.weight_offset"):
        if ckpt.kinds.get(name) != kind:
            problems.append(f"{name}: described as {ckpt.kinds.get(name)}, its weight as {kind}")
    return problems
