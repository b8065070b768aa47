"""Dry-run depth reduction: find a config's layer stacks generically and shrink them to a budget.

A dry run initialises weights from the config, so a 70B model would need its full parameter
memory. Only depth is reduced (the number of repeated layers per stack); every other shape and
the model class stay real, so the forward still walks the model's own code path. When a config
declares per-layer kinds (e.g. `layer_types` with sliding and full attention) the kept layers
include one of each kind, so no kind of layer is skipped.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .errors import SpecError

GENERIC_ATTRS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
ENCODER_ATTRS = ("encoder_layers", "num_encoder_layers")
SPECIFIC_ATTRS = ENCODER_ATTRS + ("decoder_layers", "num_decoder_layers")
STAGE_LIST_ATTRS = ("depths",)  # per-stage block counts (ConvNeXT, Swin, ...)

BuildFn = Callable[[Any], torch.nn.Module]


@dataclass
class Stack:
    """One repeated-layer count inside a (sub-)config."""

    path: tuple[str, ...]  # sub-config attribute path from the root config
    attr: str
    total: int
    index: int | None = None  # element of a per-stage list attribute
    aliases: list[str] = field(default_factory=list)  # stored attrs that mirror this one
    layer_lists: list[str] = field(default_factory=list)  # per-layer lists to cut with it
    keep_order: list[int] = field(default_factory=list)  # layer indices in the order to keep
    first_of_kind: set[int] = field(default_factory=set)  # first layer of each distinct kind
    floor: int = 1  # fewest layers that still include every kind (e.g. dense prefix + one MoE)

    @property
    def label(self) -> str:
        name = ".".join(self.path + (self.attr,))
        return f"{name}[{self.index}]" if self.index is not None else name

    @property
    def minimum(self) -> int:
        return max(self.floor, len(self.first_of_kind))


def _sub_configs(config: Any) -> list[tuple[str, Any]]:
    from transformers import PretrainedConfig

    return [(k, v) for k, v in vars(config).items() if isinstance(v, PretrainedConfig)]


def _int_attr(stored: dict[str, Any], name: str) -> int | None:
    value = stored.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _stacks_of(config: Any, path: tuple[str, ...]) -> list[Stack]:
    stored = vars(config)
    stacks: list[Stack] = []
    encoder_values = {_int_attr(stored, a) for a in ENCODER_ATTRS} - {None}
    stage_counts = {len(v) for k, v in stored.items() if k in STAGE_LIST_ATTRS and isinstance(v, (list, tuple))}
    # With per-stage depth lists, a generic count equal to the number of stages counts stages
    # (Swin's num_layers), not layers: it is not a depth to cut.
    generic = [a for a in GENERIC_ATTRS if _int_attr(stored, a) and _int_attr(stored, a) not in stage_counts]
    primary: Stack | None = None
    for name in generic:
        value = _int_attr(stored, name)
        if value is None or value in encoder_values:
            continue  # e.g. BART's num_hidden_layers mirrors encoder_layers
        if primary is None:
            primary = Stack(path, name, value)
            stacks.append(primary)
        elif value == primary.total:
            primary.aliases.append(name)
    for name in SPECIFIC_ATTRS:
        value = _int_attr(stored, name)
        if value:
            stack = Stack(path, name, value)
            if name in ENCODER_ATTRS:
                stack.aliases = [g for g in generic if _int_attr(stored, g) == value]
            stacks.append(stack)
    for name in STAGE_LIST_ATTRS:
        value = stored.get(name)
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) and v > 0 for v in value):
            stacks.extend(Stack(path, name, v, index=i) for i, v in enumerate(value))
    if primary is not None:
        _attach_layer_lists(primary, stored)
        dense_prefix = _int_attr(stored, "first_k_dense_replace")  # DeepSeek: dense layers, then MoE
        if dense_prefix and dense_prefix < primary.total:
            primary.floor = dense_prefix + 1
    return stacks


def _attach_layer_lists(stack: Stack, stored: dict[str, Any]) -> None:
    """Per-layer lists (layer_types, ...) of the stack's length: keep one layer of each kind first."""
    names = [
        k
        for k, v in stored.items()
        if "layer" in k and isinstance(v, (list, tuple)) and len(v) == stack.total and stack.total > 1
    ]
    if not names:
        return
    try:
        rows = [tuple(stored[k][i] for k in names) for i in range(stack.total)]
        hash(tuple(rows))
    except TypeError:
        return  # unhashable entries: leave such lists alone
    firsts: dict[tuple, int] = {}
    for i, row in enumerate(rows):
        firsts.setdefault(row, i)
    stack.layer_lists = names
    stack.first_of_kind = set(firsts.values())
    stack.keep_order = sorted(firsts.values()) + [i for i in range(stack.total) if i not in stack.first_of_kind]


def find_stacks(config: Any, path: tuple[str, ...] = ()) -> list[Stack]:
    """Every layer stack of the config and its sub-configs (encoder/decoder/text/vision...)."""
    stacks = _stacks_of(config, path)
    for key, sub in _sub_configs(config):
        stacks.extend(find_stacks(sub, path + (key,)))
    return stacks


def _resolve(config: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        config = getattr(config, key)
    return config


def apply_depths(config: Any, stacks: list[Stack], depths: list[int]) -> Any:
    """A copy of the config with each stack cut to its depth (aliases and layer lists too)."""
    reduced = copy.deepcopy(config)
    for stack, depth in zip(stacks, depths):
        target = _resolve(reduced, stack.path)
        if stack.index is not None:
            values = list(getattr(target, stack.attr))
            values[stack.index] = depth
            setattr(target, stack.attr, values)
            continue
        for name in [stack.attr, *stack.aliases]:
            setattr(target, name, depth)
        if stack.layer_lists and depth < stack.total:
            kept = sorted(stack.keep_order[:depth])
            for name in stack.layer_lists:
                setattr(target, name, [getattr(target, name)[i] for i in kept])
    return reduced


def distribute(stacks: list[Stack], target: int) -> list[int]:
    """Split `target` layers over the stacks proportionally, each within [minimum, total]."""
    totals = [s.total for s in stacks]
    total = sum(totals)
    if target >= total:
        return totals
    depths = [min(s.total, max(s.minimum, (s.total * target) // total)) for s in stacks]
    while sum(depths) < target:
        grown = False
        for i, s in enumerate(stacks):
            if depths[i] < s.total and sum(depths) < target:
                depths[i] += 1
                grown = True
        if not grown:
            break
    return depths


def meta_param_bytes(build: BuildFn, config: Any, dtype: torch.dtype) -> int:
    """Parameter + buffer bytes of the model built on the meta device (allocates nothing)."""
    with torch.device("meta"):
        model = build(config)
    size = torch.empty((), dtype=dtype).element_size()
    count = sum(p.numel() for p in model.parameters()) + sum(
        b.numel() for b in model.buffers() if b.is_floating_point()
    )
    return count * size


HIDDEN_ATTRS = ("hidden_size", "d_model", "n_embd", "dim", "embed_dim")
FFN_ATTRS = ("intermediate_size", "ffn_dim", "d_ff", "n_inner", "hidden_dim", "encoder_ffn_dim", "decoder_ffn_dim")


def _first_int(holder: Any, names: tuple[str, ...]) -> int | None:
    for name in names:
        value = getattr(holder, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def config_costs(config: Any, stacks: list[Stack], minimums: list[int], dtype: torch.dtype) -> tuple[int, list[int]]:
    """Rough (base bytes, bytes per extra layer) from config sizes, for models that cannot be
    built on the meta device: embeddings + head 2*V*h, a layer 4*h^2 (attention) + 3*h*ffn."""
    size = torch.empty((), dtype=dtype).element_size()
    per_layer = []
    for stack in stacks:
        holder = _resolve(config, stack.path)
        hidden = _first_int(holder, HIDDEN_ATTRS) or 0
        ffn = _first_int(holder, FFN_ATTRS) or 4 * hidden
        per_layer.append((4 * hidden * hidden + 3 * hidden * ffn) * size)
    holders = [config, *(_resolve(config, s.path) for s in stacks)]
    vocab = next((v for h in holders if (v := _first_int(h, ("vocab_size",)))), 0)
    hidden = next((v for h in holders if (v := _first_int(h, HIDDEN_ATTRS))), 0)
    base = 2 * vocab * hidden * size + sum(c * m for c, m in zip(per_layer, minimums))
    return base, per_layer


def meta_costs(
    build: BuildFn, config: Any, stacks: list[Stack], minimums: list[int], dtype: torch.dtype
) -> tuple[int, list[int]]:
    """(bytes at minimal depth, bytes per extra layer of each stack), from meta builds."""
    base = meta_param_bytes(build, apply_depths(config, stacks, minimums), dtype)
    per_layer = []
    for i, stack in enumerate(stacks):
        if stack.total > minimums[i]:
            grown = list(minimums)
            grown[i] += 1
            per_layer.append(max(0, meta_param_bytes(build, apply_depths(config, stacks, grown), dtype) - base))
        else:
            per_layer.append(0)
    return base, per_layer


@dataclass
class DepthPlan:
    config: Any
    layers_total: int | None
    layers_built: int | None
    depth_reduced: bool
    param_bytes: int | None  # parameter memory of what will be built (None: unknown)
    over_budget: bool  # even the minimal depth exceeds the budget
    stacks: dict[str, list[int]]  # label -> [built, total]
    sized_by: str = "meta"  # "meta" (exact) or why the config estimate was used


def plan_depth(config: Any, build: BuildFn, dtype: torch.dtype, budget_bytes: int, max_layers: int | None) -> DepthPlan:
    """Choose the deepest model within budget (and max_layers), sized on the meta device, or
    from the config when the model's code cannot run on meta (e.g. it calls .item() in __init__)."""
    stacks = find_stacks(config)
    totals = [s.total for s in stacks]
    minimums = [s.minimum for s in stacks]
    sized_by = "meta"
    try:
        base, per_layer = meta_costs(build, config, stacks, minimums, dtype)
    except Exception as exc:
        sized_by = f"config estimate (meta build failed: {type(exc).__name__})"
        base, per_layer = config_costs(config, stacks, minimums, dtype)

    def estimate(depths: list[int]) -> int:
        return base + sum(c * (d - m) for c, d, m in zip(per_layer, depths, minimums))

    target = min(sum(totals), max_layers) if max_layers else sum(totals)
    target = max(target, sum(minimums))
    depths = distribute(stacks, target)
    while estimate(depths) > budget_bytes and target > sum(minimums):
        target -= 1
        depths = distribute(stacks, target)
    reduced = depths != totals
    final = apply_depths(config, stacks, depths) if reduced else config
    param_bytes: int | None = estimate(depths)
    if sized_by == "meta":  # exact size; cheap, the model is reduced or already within budget
        param_bytes = meta_param_bytes(build, final, dtype)
    elif not param_bytes:
        param_bytes = None
    return DepthPlan(
        config=final,
        layers_total=sum(totals) if stacks else None,
        layers_built=sum(depths) if stacks else None,
        depth_reduced=reduced,
        param_bytes=param_bytes,
        over_budget=param_bytes is not None and param_bytes > budget_bytes,
        stacks={s.label: [d, s.total] for s, d in zip(stacks, depths)},
        sized_by=sized_by,
    )


def proxy_config(config: Any, layers: int) -> tuple[Any, dict[str, Any]]:
    """A registered reduced-depth proxy (`register_model --depth N`): the config with every layer stack
    cut to `layers` (a stack with fewer keeps its own; one layer of each kind is kept, as a dry run
    keeps them), and the evidence every run records: {"layers", "of" (the deepest stack's count),
    "stacks": {label: [built, total]}}."""
    stacks = find_stacks(config)
    if not stacks:
        raise SpecError(f"depth {layers}: the model's config names no layer stack to reduce")
    of = max(s.total for s in stacks)
    if layers > of:
        raise SpecError(f"depth {layers} is not within the model's {of} layers (a proxy builds 1 to {of})")
    depths = [min(s.total, max(layers, s.minimum)) for s in stacks]
    evidence = {"layers": layers, "of": of, "stacks": {s.label: [d, s.total] for s, d in zip(stacks, depths)}}
    return apply_depths(config, stacks, depths), evidence
