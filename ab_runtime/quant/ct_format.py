"""A compressed-tensors checkpoint (what LLM-Compressor saves and vLLM loads with its
`compressed-tensors` method), read without the library.

Layout, as compressed-tensors 0.19.0 writes the `int-quantized` format: the model's `config.json`
carries `quantization_config` (`quant_method: compressed-tensors`, `format`, `config_groups`, each
with its `weights` and `input_activations` arguments, `ignore`); the tensors live in
`model*.safetensors`. A quantized linear `X` has `X.weight` (int8, [out, in]) and `X.weight_scale`
(float, [out, 1] for the `channel` strategy), and `X.weight_zero_point` only when asymmetric.

The scheme executed here is compressed-tensors' `W8A8` preset, `CT_W8A8`: weights int8, channel,
symmetric, static; input activations int8, token, symmetric, dynamic. Its numerics are those of
msModelSlim's W8A8_DYNAMIC, and ab_runtime/quant/standard.py holds it to the same row.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .checkpoint import CheckpointError, QuantLinear, linear_of, load_shards, read_json

CONFIG_FILE = "config.json"
QUANT_METHOD = "compressed-tensors"
FORMAT = "int-quantized"
CT_W8A8 = "CT_W8A8"
# The quantization arguments of the scheme executed here, as config.json states them.
W8A8_WEIGHTS = {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True, "dynamic": False}
W8A8_INPUTS = {"num_bits": 8, "type": "int", "strategy": "token", "symmetric": True, "dynamic": True}
# Tensors of schemes not executed here: static activation scales, zero points of asymmetric weights.
UNEXECUTED_SUFFIXES = (".input_scale", ".input_zero_point", ".weight_zero_point", ".weight_g_idx", ".weight_packed")


@dataclass(frozen=True)
class CtCheckpoint:
    """A compressed-tensors checkpoint as saved: its quantization config and every tensor."""

    directory: Path
    quant_type: str
    config_problems: tuple[str, ...]
    tensors: dict[str, torch.Tensor]

    def quantized_modules(self) -> list[str]:
        suffix = ".weight_scale"
        return sorted(name[: -len(suffix)] for name in self.tensors if name.endswith(suffix))

    def problems(self) -> list[str]:
        problems = list(self.config_problems)
        quantized = set(self.quantized_modules())
        for module in sorted(quantized):
            problems += _check_linear(self.tensors, module)
        for name, tensor in sorted(self.tensors.items()):
            if name.endswith(UNEXECUTED_SUFFIXES):
                problems.append(f"{name}: a tensor of a scheme not executed here (only {CT_W8A8})")
            elif tensor.dtype == torch.int8 and name.removesuffix(".weight") not in quantized:
                problems.append(f"{name}: an int8 tensor without a weight_scale beside it")
        return problems

    def float_tensors(self) -> dict[str, torch.Tensor]:
        quantized = {f"{m}.{t}" for m in self.quantized_modules() for t in ("weight", "weight_scale")}
        return {k: v for k, v in self.tensors.items() if k not in quantized}

    def linears(self) -> dict[str, QuantLinear]:
        return {m: linear_of(self.tensors, m, quantize_input=True) for m in self.quantized_modules()}

    def weight_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors.values())


def read_ct_checkpoint(directory: Path) -> CtCheckpoint:
    config = read_json(directory / CONFIG_FILE)
    quantization = config.get("quantization_config")
    if not isinstance(quantization, dict) or quantization.get("quant_method") != QUANT_METHOD:
        raise CheckpointError(f"{directory / CONFIG_FILE}: no quantization_config with quant_method {QUANT_METHOD}")
    tensors = load_shards(directory, "model*.safetensors", CONFIG_FILE)
    return CtCheckpoint(directory, CT_W8A8, tuple(config_problems(quantization)), tensors)


def config_problems(quantization: dict[str, Any]) -> list[str]:
    """How the quantization config departs from the scheme executed here (empty: it is CT_W8A8)."""
    problems: list[str] = []
    if quantization.get("format") != FORMAT:
        problems.append(f"quantization_config format {quantization.get('format')!r}, executed here: {FORMAT!r}")
    groups = quantization.get("config_groups")
    if not isinstance(groups, dict) or len(groups) != 1:
        return [*problems, "quantization_config: one config group expected (a non-uniform scheme is not executed)"]
    group = next(iter(groups.values()))
    for part, expected in (("weights", W8A8_WEIGHTS), ("input_activations", W8A8_INPUTS)):
        args = group.get(part) if isinstance(group, dict) else None
        found = {k: (args or {}).get(k) for k in expected}
        if found != expected:
            problems.append(f"quantization_config {part} {found}, executed here: {expected}")
    return problems


def _check_linear(tensors: dict[str, torch.Tensor], module: str) -> list[str]:
    weight = tensors.get(f"{module}.weight")
    scale = tensors[f"{module}.weight_scale"]
    if weight is None:
        return [f"{module}: weight_scale saved without its weight"]
    problems: list[str] = []
    if weight.dtype != torch.int8:
        problems.append(f"{module}.weight: {weight.dtype}, expected torch.int8 (format {FORMAT})")
    if weight.dim() != 2 or tuple(scale.shape) != (weight.shape[0], 1):
        problems.append(
            f"{module}: scale {tuple(scale.shape)} does not match weight {tuple(weight.shape)} "
            "(expected one per output channel)"
        )
    elif not bool(torch.isfinite(scale).all()) or not bool((scale > 0).all()):
        problems.append(f"{module}.weight_scale: not all positive and finite")
    return problems
