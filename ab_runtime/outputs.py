"""Turn whatever a forward returned into named tensors, and describe them.

ModelOutput, tuples and dicts are flattened into `name -> Tensor` (nested names joined with
"."), skipping caches (past_key_values, XLNet's mems, Cache objects) and None: caches are not
results, their layout differs between transformers versions, and they are not batch-first.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch

OUTPUTS_FORMAT = "ascendbridge.outputs/1"
SKIPPED_KEYS = ("past_key_values", "cache")  # substrings of skipped output names
SKIPPED_NAMES = ("mems", "past_buckets_states")  # exact names of other recurrent state


def named_outputs(outputs: Any, prefix: str = "") -> dict[str, torch.Tensor]:
    if isinstance(outputs, torch.Tensor):
        return {prefix or "output": outputs}
    named: dict[str, torch.Tensor] = {}
    if isinstance(outputs, Mapping):
        items = [(str(k), v) for k, v in outputs.items()]
    elif isinstance(outputs, (tuple, list)):
        items = [(str(i), v) for i, v in enumerate(outputs)]
    else:
        return named  # Cache objects and other non-tensor values
    for key, value in items:
        if value is None or key in SKIPPED_NAMES or any(s in key.lower() for s in SKIPPED_KEYS):
            continue
        name = f"{prefix}.{key}" if prefix else (key if isinstance(outputs, Mapping) else f"output_{key}")
        named.update(named_outputs(value, name))
    return named


def tensor_stats(tensor: torch.Tensor) -> dict[str, Any]:
    """Shape, dtype, finiteness and mean |x| (computed in float32 on the tensor's device)."""
    data = tensor.detach()
    if data.is_floating_point() or data.is_complex():
        finite = bool(torch.isfinite(data).all().item())
    else:
        finite = True
    mean_abs = float(data.float().abs().mean().item()) if data.numel() else 0.0
    return {
        "shape": list(data.shape),
        "dtype": str(data.dtype).replace("torch.", ""),
        "finite": finite,
        "mean_abs": mean_abs if finite else None,
    }


def describe(outputs: dict[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    return {name: tensor_stats(value) for name, value in outputs.items()}


def tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor in a value of nested lists, tuples and dicts (an op's arguments or results)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)
