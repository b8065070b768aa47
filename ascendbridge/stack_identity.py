"""Stack identity: the short id every result names, and the one line people read.

Pure functions on the probe's dict (ascendbridge/gatekit/inner/stack.py), kept in the kernel so the board,
the main job and the dashboard can show stacks without importing a stage package.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# Fields that identify a stack (the executable path does not: the same stack may live anywhere).
IDENTITY_FIELDS: tuple[str, ...] = ("python", "torch", "torch_npu", "transformers", "cann", "npu_driver", "cuda")


def stack_id(stack: dict[str, Any]) -> str:
    """A short, stable identifier of a stack: sha256 of its identifying fields."""
    identity = {key: stack.get(key) for key in IDENTITY_FIELDS}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]


def describe(stack: dict[str, Any]) -> str:
    """`python 3.11.7, torch 2.13.0+cpu, torch_npu -, transformers 5.24.0, CANN -` (+ driver, CUDA)."""
    extra = ""
    driver = stack.get("npu_driver") or {}
    if driver:
        extra += f", npu driver {driver.get('driver', '?')} firmware {driver.get('firmware', '?')}"
    cuda = stack.get("cuda") or {}
    if cuda:
        extra += f", CUDA {cuda.get('runtime')} driver {cuda.get('driver', '?')}"
    return (
        f"python {stack.get('python')}, torch {stack.get('torch') or '-'}, torch_npu {stack.get('torch_npu') or '-'}, "
        f"transformers {stack.get('transformers') or '-'}, CANN {stack.get('cann') or '-'}{extra}"
    )
