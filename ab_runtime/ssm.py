"""Hybrid state-space models (Mamba, Mamba-2, Jamba, ...) without their optional CUDA kernels.

transformers runs these layers through mamba_ssm / causal_conv1d when installed (CUDA only) and
through its own sequential PyTorch scan otherwise; the scan is what runs on CPU and on Ascend,
and it is deterministic. The run says which path it took instead of leaving it to a warning.
"""

from __future__ import annotations

import importlib.util
from typing import Any

SSM_MODEL_TYPES = frozenset(
    {
        "mamba",
        "mamba2",
        "falcon_mamba",
        "jamba",
        "zamba",
        "zamba2",
        "bamba",
        "falcon_h1",
        "granitemoehybrid",
        "nemotron_h",
    }
)
OPTIONAL_KERNELS = ("mamba_ssm", "causal_conv1d")


def kernel_notes(config: Any) -> list[str]:
    """One note for a state-space model: which kernels are missing, so the PyTorch scan runs."""
    if getattr(config, "model_type", None) not in SSM_MODEL_TYPES:
        return []
    missing = [name for name in OPTIONAL_KERNELS if importlib.util.find_spec(name) is None]
    if missing:
        return [
            f"state-space layers run transformers' PyTorch scan ({', '.join(missing)} not installed; "
            "those kernels are CUDA-only and optional)"
        ]
    return [f"state-space kernels {', '.join(OPTIONAL_KERNELS)} installed: transformers uses them on CUDA"]
