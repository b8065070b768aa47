"""Mixture-of-experts models on their own paths: routes as decisions, a float64 reference that runs.

Routing is compared as decisions (which experts each token went to) next to the router logits, so
the comparator can tell a near-tie flip from a real routing difference (comparator.route_diagnosis).
transformers' grouped expert matmul has no float64 kernel ("Expected mat_a to be Float32, BFloat16
or Float16 matrix, got Double"), so the float64 reference runs the experts eagerly: the same
arithmetic, one expert at a time.
"""

from __future__ import annotations

import torch

from .inputs import routing_top_k


def routing_outputs(
    named: dict[str, torch.Tensor], inputs: dict[str, torch.Tensor], top_k: int
) -> dict[str, torch.Tensor]:
    """MoE router logits as (batch, seq, experts) plus the routing decisions they imply
    (`routing.N`: the top-k experts of every token, sorted), so routes are compared as decisions;
    the auxiliary loss is a training term and is dropped."""
    main = next((v for k, v in inputs.items() if k in ("input_ids", "inputs_embeds")), None)
    out: dict[str, torch.Tensor] = {}
    for name, value in named.items():
        if name == "aux_loss":
            continue
        layer = name.split(".", 1)
        if layer[0] != "router_logits" or value.dim() != 2:
            out[name] = value
            continue
        if main is not None and value.shape[0] == main.shape[0] * main.shape[1]:
            value = value.reshape(main.shape[0], main.shape[1], value.shape[-1])
        out[name] = value
        index = layer[1] if len(layer) > 1 else "0"
        k = min(top_k, value.shape[-1])
        out[f"routing.{index}"] = value.float().topk(k, dim=-1).indices.sort(dim=-1).values
    return out


def float64_path(model: torch.nn.Module) -> str | None:
    """Switch an MoE model's experts to the eager implementation for a float64 run; returns the
    note to record, or None when nothing changed (not MoE, or already eager)."""
    setter = getattr(model, "set_experts_implementation", None)
    config = getattr(model, "config", None)
    if setter is None or not routing_top_k(config) or getattr(config, "_experts_implementation", None) == "eager":
        return None
    setter("eager")
    return "experts run eagerly in the float64 reference (the grouped expert matmul has no float64 kernel)"
