"""The memory figures a model run and the framework's memory plan must agree on.

Standard library only (a declared leaf, tests/test_layout.py): the runs read the host's memory and
size what they build with these, and the framework's memory plan (ascendbridge/memory_plan.py)
predicts the same runs' peaks from the same numbers before anything is loaded, so a change of
either rule changes both.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import RuntimeDiagnosis

GiB = 1024**3
MEMINFO = Path("/proc/meminfo")

# A dry run (config-initialised weights) builds at most this many float32 parameter bytes, reducing
# depth to fit (ab_runtime/loading.py); ASCENDBRIDGE_DRY_RUN_MAX_GB overrides it. 4 GiB: a model of up
# to about 1 B parameters (Qwen3-0.6B's 2.2 GiB) is built whole, as real weights would be; the memory
# plans judge whether the host holds it. At 2 GiB Qwen3-0.6B's benchmark measured 24 of its 28 layers.
DEFAULT_DRY_RUN_MAX_GB = 4.0
# The accuracy harness's float64 reference copy is skipped above this size (ab_runtime/harness.py).
FP64_REFERENCE_MAX_BYTES = 4 * GiB
# Training memory per parameter: weight, gradient and two AdamW moments (4 copies) when it trains,
# the weight alone when frozen (LoRA's base); x1.25 for activations and workspace.
TRAINED_COPIES, HEADROOM = 4, 1.25
FP32_BYTES, BF16_BYTES = 4, 2


def meminfo(path: Path = MEMINFO) -> dict[str, int]:
    """/proc/meminfo as bytes by field (MemTotal, MemAvailable, ...); empty where there is no such file."""
    out: dict[str, int] = {}
    try:
        text = path.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        fields = rest.split()
        if fields and fields[0].isdigit():
            out[name.strip()] = int(fields[0]) * (1024 if fields[1:] == ["kB"] else 1)
    return out


def host_available_memory() -> int | None:
    """MemAvailable in bytes (None where there is no /proc/meminfo)."""
    return meminfo().get("MemAvailable")


def dry_run_budget() -> int:
    """Float32 parameter bytes a dry run may build (ASCENDBRIDGE_DRY_RUN_MAX_GB, default 4 GiB)."""
    raw = os.environ.get("ASCENDBRIDGE_DRY_RUN_MAX_GB")
    try:
        value = float(raw) if raw else DEFAULT_DRY_RUN_MAX_GB
    except ValueError:
        raise RuntimeDiagnosis(f"ASCENDBRIDGE_DRY_RUN_MAX_GB must be a number of GB, got '{raw}'") from None
    if value <= 0:
        raise RuntimeDiagnosis("ASCENDBRIDGE_DRY_RUN_MAX_GB must be positive")
    return int(value * GiB)


def training_bytes(trainable: int, frozen: int, weight_bytes: int = FP32_BYTES) -> int:
    """The training state's estimated bytes with `weight_bytes` per weight (optimizer moments alike)."""
    return int((trainable * TRAINED_COPIES + frozen) * weight_bytes * HEADROOM)
