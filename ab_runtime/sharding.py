"""Models larger than one device: load them sharded over the cards the team lead claimed.

Discovery writes a size plan into adaptation.json (`device_plan`: {"devices": N, "strategy":
"device_map", "per_device_gb": G, ...}); the team lead then gives the model's timed stages N cards
(CUDA_VISIBLE_DEVICES / ASCEND_RT_VISIBLE_DEVICES, or ASCENDBRIDGE_NPU_INDEX for profiled runs).
When this job sees those N accelerators, the model is spread over them with accelerate's big-model
API, the one transformers' `from_pretrained(device_map=..., max_memory=...)` uses:
`get_balanced_memory` + `infer_auto_device_map` (with the model's `_no_split_modules`, so a
decoder layer never straddles two cards) build the map, capped at the plan's memory per card;
`from_pretrained(device_map=map)` loads real weights straight onto the cards, `dispatch_model`
places a model built from its config. Inputs go to the first shard's card (the job's own
`npu:0` / `cuda:0`, or `npu:<first ASCENDBRIDGE_NPU_INDEX>`). On one device or on CPU nothing
changes: the model is moved with `.to(device)` as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from .device import DeviceChoice, accelerator_indices
from .errors import DeviceUnavailable


@dataclass(frozen=True)
class ShardPlan:
    """The cards one model is spread over (torch's indices, the first one takes the inputs)."""

    kind: str  # npu | cuda
    indices: tuple[int, ...]
    per_device_gb: float | None  # the plan's memory per card; None: what accelerate finds free

    @property
    def devices(self) -> list[str]:
        return [f"{self.kind}:{i}" for i in self.indices]

    @property
    def first_device(self) -> str:
        return self.devices[0]

    def max_memory(self) -> dict[int, str] | None:
        """accelerate's `max_memory`: each claimed card's cap, e.g. {0: "64GiB", 1: "64GiB"}."""
        if self.per_device_gb is None:
            return None
        return {i: f"{self.per_device_gb:g}GiB" for i in self.indices}

    def evidence(self, device_map: dict[str, str]) -> dict[str, Any]:
        """What results record: the cards, their caps and which module went where."""
        return {"devices": self.devices, "max_memory": self.max_memory(), "map": dict(device_map)}


def planned_devices(device_plan: dict[str, Any] | None) -> int:
    """Devices discovery's plan claims (1 without a plan, or with an unreadable count)."""
    try:
        return max(1, int((device_plan or {}).get("devices") or 1))
    except (TypeError, ValueError):
        return 1


def shard_plan(device_plan: dict[str, Any] | None, kind: str, visible: tuple[int, ...]) -> ShardPlan | None:
    """The shard plan for a job on `kind` seeing the accelerators `visible`; None when the model
    loads as today (a one-device plan, or a CPU run: a CPU host counts as one device). A plan for
    more cards than the job sees is an error, not a silent single-card load that cannot fit."""
    need = planned_devices(device_plan)
    if need <= 1 or kind == "cpu":
        return None
    if len(visible) < need:
        seen = ",".join(map(str, visible)) or "none"
        raise DeviceUnavailable(
            f"the model's device plan shards it over {need} {kind} devices but this job sees {len(visible)} "
            f"({kind}: {seen}); run it through the team lead (it claims {need} cards) or make {need} cards visible"
        )
    raw = (device_plan or {}).get("per_device_gb")
    return ShardPlan(kind, tuple(visible[:need]), float(raw) if isinstance(raw, (int, float)) and raw > 0 else None)


def plan_for(device_plan: dict[str, Any] | None, choice: DeviceChoice) -> ShardPlan | None:
    """shard_plan for the device this process selected (its visible cards from the device layer)."""
    return shard_plan(device_plan, choice.kind, accelerator_indices(choice))


def build_device_map(model: torch.nn.Module, shard: ShardPlan, dtype: torch.dtype) -> dict[str, str]:
    """Module name -> card for `model` (real or on the meta device) over the plan's cards, balanced
    as transformers' device_map="auto" balances; a model that would spill past them is an error."""
    from accelerate import infer_auto_device_map
    from accelerate.utils import get_balanced_memory

    no_split = sorted(getattr(model, "_no_split_modules", None) or [])
    caps = shard.max_memory()
    if caps is None:
        from accelerate.utils import get_max_memory

        free = get_max_memory()
        caps = {i: free[i] for i in shard.indices}
    balanced = get_balanced_memory(model, max_memory=caps, no_split_module_classes=no_split, dtype=dtype)
    raw = infer_auto_device_map(model, max_memory=balanced, no_split_module_classes=no_split, dtype=dtype)
    spilled = sorted(name for name, where in raw.items() if where not in shard.indices)
    if spilled:
        raise DeviceUnavailable(
            f"the model does not fit {len(shard.indices)} x {shard.per_device_gb} GiB {shard.kind} devices: "
            f"{len(spilled)} module(s) would be offloaded ({', '.join(spilled[:3])}...)"
        )
    return {name: f"{shard.kind}:{where}" for name, where in raw.items()}


@contextlib.contextmanager
def empty_weights() -> Iterator[None]:
    """A model skeleton on the meta device (accelerate.init_empty_weights): sized, never allocated."""
    from accelerate import init_empty_weights

    with init_empty_weights():
        yield


def place(
    model: torch.nn.Module, choice: DeviceChoice, shard: ShardPlan | None, dtype: torch.dtype
) -> tuple[torch.nn.Module, dict[str, str] | None]:
    """The model on its device(s) in eval mode, and its device map (None: one device)."""
    if shard is None:
        return model.to(choice.torch_device).eval(), None
    from accelerate import dispatch_model

    device_map = build_device_map(model, shard, dtype)
    return dispatch_model(model, device_map=device_map).eval(), device_map
