"""Stack probe, run with the interpreter a model runs on: which software stack is this?

    python stack.py

Prints one JSON object: Python, torch, torch_npu, transformers (None where absent), the CANN
version from the toolkit's version file (shared with probe.py), the Ascend driver and firmware
from `npu-smi` and the CUDA runtime and NVIDIA driver on GPUs, each only where present. Fast:
it reads package metadata and files without importing torch (an import costs seconds) and
measures nothing, so every result can carry it.
"""

from __future__ import annotations

import importlib.util
import json
import platform
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from _framework import framework_module
from probe import cann_version


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


_tool = framework_module("tools").run_tool  # the team lead's device probes ask the same way


def npu_driver() -> dict[str, str] | None:
    """Driver and firmware from `npu-smi info` (header `Version:`) and `npu-smi info -t board -i 0`
    (`Firmware Version`), as the Ascend HDK documents them; None without npu-smi."""
    info = _tool(["npu-smi", "info"])
    if info is None:
        return None
    out: dict[str, str] = {}
    match = re.search(r"Version:\s*([0-9A-Za-z.\-]+)", info)
    if match:
        out["driver"] = match.group(1)
    board = _tool(["npu-smi", "info", "-t", "board", "-i", "0"]) or ""
    match = re.search(r"Firmware Version\s*:\s*(\S+)", board)
    if match:
        out["firmware"] = match.group(1)
    return out or None


def torch_cuda_version() -> str | None:
    """The CUDA runtime torch was built for, read from torch/version.py (None for CPU/NPU builds)."""
    spec = importlib.util.find_spec("torch")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "version.py"
        if path.is_file():
            match = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", path.read_text(), re.M)
            return match.group(1) if match else None
    return None


def cuda_stack() -> dict[str, Any] | None:
    """CUDA runtime torch was built for and, where nvidia-smi exists, the driver and GPU names."""
    runtime = torch_cuda_version()
    if not runtime:
        return None
    out: dict[str, Any] = {"runtime": runtime}
    smi = _tool(["nvidia-smi", "--query-gpu=driver_version,name", "--format=csv,noheader"])
    if smi:
        rows = [line.split(",", 1) for line in smi.strip().splitlines() if "," in line]
        if rows:
            out["driver"] = rows[0][0].strip()
            out["gpus"] = [name.strip() for _, name in rows]
    return out


def main() -> int:
    stack = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "torch": _dist_version("torch"),
        "torch_npu": _dist_version("torch-npu"),
        "transformers": _dist_version("transformers"),
        "cann": (cann_version() or {}).get("version"),
        "npu_driver": npu_driver(),
        "cuda": cuda_stack(),
    }
    print(json.dumps(stack, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
