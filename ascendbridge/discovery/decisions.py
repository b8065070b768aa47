"""The discovery verdict: proceed, skip (too large for every host) or block (a human must act).

Rules are checked in the order a person would want: a model too large for every host of the pool
leaves the pipeline whatever else is true, so nobody is asked to allow remote code or provide a
token for a model that could never run. A model larger than one device but within a host's
devices proceeds with a plan: how many devices its timed stages claim at once (device_map
sharding over them) and the tensor-parallel degree a serving engine would use.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel

from ascendbridge.discovery.errors import DiscoveryError
from ascendbridge.discovery.model_info import DiscoveryDecision, ModelInfo
from ascendbridge.settings import DeviceSettings, section

DEFAULT_DEVICE_MEMORY_GB = DeviceSettings.DEFAULT_MEMORY_GB
# Weights must leave room for activations, the KV cache and the runtime's own allocations.
MEMORY_MARGIN = 1.2
GIB = 1024**3
BYTES_PER_ELEMENT = {
    "float64": 8.0,
    "float32": 4.0,
    "float16": 2.0,
    "bfloat16": 2.0,
    "float8_e4m3fn": 1.0,
    "float8_e5m2": 1.0,
    "float8_e8m0fnu": 1.0,
    "float4_e2m1": 0.5,
}


def _settings() -> DeviceSettings:
    try:
        return section(DeviceSettings)
    except ValueError as exc:
        raise DiscoveryError(str(exc), "bad_setting") from None


def device_memory_gb() -> float:
    """One device's memory when nothing better is known (ASCENDBRIDGE_DEVICE_MEMORY_GB, default 64)."""
    return _settings().memory_gb()


class PoolHost(BaseModel):
    """One host of the pool, as sizing sees it: `count` devices of `memory_gb` each."""

    host: str
    kind: str
    count: int
    memory_gb: float

    def describe(self) -> str:
        return f"{self.host} ({self.count} x {self.memory_gb:g} GiB {self.kind})"


def host_pool(memory_gb: float | None = None) -> list[PoolHost]:
    """The hosts models are sized against: the team lead's ASCENDBRIDGE_DEVICE_POOL, else one device.
    An explicit memory (argument or ASCENDBRIDGE_DEVICE_MEMORY_GB) replaces each device's memory; a
    CPU host counts as one device (its timed slots share one RAM)."""
    settings = _settings()
    override = memory_gb if memory_gb is not None else settings.device_memory_gb
    raw = settings.device_pool
    if not raw:
        return [PoolHost(host="this host", kind="device", count=1, memory_gb=override or settings.memory_gb())]
    try:
        entries = json.loads(raw)
        hosts = [
            PoolHost(
                host=str(e["host"]),
                kind=str(e["kind"]),
                count=1 if e["kind"] == "cpu" else max(1, int(e["count"])),
                memory_gb=float(override or e.get("memory_gb") or settings.memory_gb()),
            )
            for e in entries
        ]
    except (ValueError, TypeError, KeyError) as exc:
        raise DiscoveryError(f"ASCENDBRIDGE_DEVICE_POOL is not a list of hosts: {exc}", "bad_setting") from None
    if not hosts:
        raise DiscoveryError("ASCENDBRIDGE_DEVICE_POOL names no host", "bad_setting")
    return hosts


def device_plan(need_bytes: int, pool: list[PoolHost]) -> dict[str, Any] | None:
    """The fewest devices of one host that hold `need_bytes` (margin included), or None if no host can."""
    best: tuple[int, PoolHost] | None = None
    for host in pool:
        n = max(1, math.ceil(need_bytes * MEMORY_MARGIN / (host.memory_gb * GIB)))
        if n <= host.count and (best is None or n < best[0]):
            best = (n, host)
    if best is None:
        return None
    n, host = best
    tp = 1 << (n - 1).bit_length()  # engines split heads evenly: the next power of two
    return {
        "devices": n,
        "strategy": "single" if n == 1 else "device_map",
        "host": host.host,
        "kind": host.kind,
        "per_device_gb": host.memory_gb,
        "need_gb": round(need_bytes * MEMORY_MARGIN / GIB, 1),
        "tensor_parallel_degree": tp if tp <= host.count else n,
    }


def weight_bytes(info: ModelInfo) -> int | None:
    """Bytes the weights take on the device in the model's own dtype (float32 when unknown)."""
    if info.parameter_count is None:
        return None
    if info.parameters_by_dtype:
        return int(sum(n * BYTES_PER_ELEMENT.get(dt, 4.0) for dt, n in info.parameters_by_dtype.items()))
    return int(info.parameter_count * BYTES_PER_ELEMENT.get(info.dtype or "float32", 4.0))


def decide(
    info: ModelInfo, allow_remote_code: bool, has_token: bool, memory_gb: float | None = None
) -> DiscoveryDecision:
    pool = host_pool(memory_gb)
    need = weight_bytes(info)
    plan = device_plan(need, pool) if need is not None else None
    if need is not None and plan is None:
        how = "estimated from config.json" if info.parameter_count_source == "config_estimate" else "from the weights"
        hosts = "; ".join(h.describe() for h in pool)
        return DiscoveryDecision(
            action="skip",
            rule="too_large",
            reason=(
                f"{info.parameter_count:,} parameters in {info.dtype or 'float32'} need "
                f"{need / GIB:.1f} GiB ({how}; x{MEMORY_MARGIN} margin = {need * MEMORY_MARGIN / GIB:.1f} GiB) "
                f"but no host holds that: {hosts} (ASCENDBRIDGE_DEVICE_MEMORY_GB, --devices)"
            ),
        )
    if info.gated and info.source == "huggingface" and not has_token:
        return DiscoveryDecision(
            action="block",
            rule="gated_no_token",
            reason=(
                f"{info.model_id} is gated on the Hub and no HF_TOKEN is set; request access, set HF_TOKEN, then retry"
            ),
        )
    if info.needs_remote_code and not allow_remote_code:
        what = ", ".join(info.remote_code_files) or "auto_map in config.json"
        return DiscoveryDecision(
            action="block",
            rule="remote_code_not_allowed",
            reason=(
                f"{info.model_id} needs remote code ({what}); review it, then "
                f"`board_ops.py allow_remote_code {info.model_id}` and retry"
            ),
        )
    size = f"{need / GIB:.2f} GiB of weights" if need is not None else "size unknown"
    family = info.task_family or f"no task family ({info.task_family_reason})"
    if plan is None or plan["devices"] == 1:
        where = (
            f"fits one {pool[0].memory_gb:g} GiB device"
            if plan is None
            else f"fits one {plan['per_device_gb']:g} GiB device"
        )
    else:
        where = (
            f"needs {plan['devices']} x {plan['per_device_gb']:g} GiB devices on {plan['host']} "
            f"(device_map over {plan['devices']}, tensor-parallel degree {plan['tensor_parallel_degree']})"
        )
    return DiscoveryDecision(action="proceed", rule=None, reason=f"{family}; {size} {where}", plan=plan)
