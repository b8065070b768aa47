"""The discovery verdict: proceed, skip (too large for the device) or block (a human must act).

Rules are checked in the order a person would want: a model too large for the device leaves
the pipeline whatever else is true, so nobody is asked to allow remote code or provide a token
for a model that could never run.
"""

from __future__ import annotations

import os
from typing import Optional

from ascendbridge.discovery.errors import DiscoveryError
from ascendbridge.discovery.model_info import DiscoveryDecision, ModelInfo

DEFAULT_DEVICE_MEMORY_GB = 64.0
# Weights must leave room for activations, the KV cache and the runtime's own allocations.
MEMORY_MARGIN = 1.2
GIB = 1024**3
BYTES_PER_ELEMENT = {
    "float64": 8.0, "float32": 4.0, "float16": 2.0, "bfloat16": 2.0,
    "float8_e4m3fn": 1.0, "float8_e5m2": 1.0, "float8_e8m0fnu": 1.0, "float4_e2m1": 0.5,
}


def device_memory_gb() -> float:
    raw = os.environ.get("ASCENDBRIDGE_DEVICE_MEMORY_GB", "")
    if not raw.strip():
        return DEFAULT_DEVICE_MEMORY_GB
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise DiscoveryError(f"ASCENDBRIDGE_DEVICE_MEMORY_GB={raw!r} is not a positive number of GiB", "bad_setting")
    return value


def weight_bytes(info: ModelInfo) -> Optional[int]:
    """Bytes the weights take on the device in the model's own dtype (float32 when unknown)."""
    if info.parameter_count is None:
        return None
    if info.parameters_by_dtype:
        return int(sum(n * BYTES_PER_ELEMENT.get(dt, 4.0) for dt, n in info.parameters_by_dtype.items()))
    return int(info.parameter_count * BYTES_PER_ELEMENT.get(info.dtype or "float32", 4.0))


def decide(info: ModelInfo, allow_remote_code: bool, has_token: bool,
           memory_gb: Optional[float] = None) -> DiscoveryDecision:
    memory = device_memory_gb() if memory_gb is None else memory_gb
    need = weight_bytes(info)
    if need is not None and need * MEMORY_MARGIN > memory * GIB:
        how = "estimated from config.json" if info.parameter_count_source == "config_estimate" else "from the weights"
        return DiscoveryDecision(
            action="skip", rule="too_large",
            reason=(f"{info.parameter_count:,} parameters in {info.dtype or 'float32'} need "
                    f"{need / GIB:.1f} GiB ({how}; x{MEMORY_MARGIN} margin = {need * MEMORY_MARGIN / GIB:.1f} GiB) "
                    f"but the device has {memory:g} GiB (ASCENDBRIDGE_DEVICE_MEMORY_GB)"),
        )
    if info.gated and info.source == "huggingface" and not has_token:
        return DiscoveryDecision(
            action="block", rule="gated_no_token",
            reason=(f"{info.model_id} is gated on the Hub and no HF_TOKEN is set; "
                    "request access, set HF_TOKEN, then retry"),
        )
    if info.needs_remote_code and not allow_remote_code:
        what = ", ".join(info.remote_code_files) or "auto_map in config.json"
        return DiscoveryDecision(
            action="block", rule="remote_code_not_allowed",
            reason=(f"{info.model_id} needs remote code ({what}); review it, then "
                    f"`board_ops.py allow_remote_code {info.model_id}` and retry"),
        )
    size = f"{need / GIB:.2f} GiB of weights" if need is not None else "size unknown"
    family = info.task_family or f"no task family ({info.task_family_reason})"
    return DiscoveryDecision(action="proceed", rule=None, reason=f"{family}; {size} fits {memory:g} GiB")
