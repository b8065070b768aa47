"""Test doubles for device inventories (no NPU or GPU exists on the test machine).

FAKE_NPU_SMI_8X64 is `npu-smi info` as an 8 x Ascend 910B3 (64 GiB HBM) server prints it (driver
23.0 layout); FAKE_NVIDIA_SMI_2X is nvidia-smi's CSV query for two 141 GiB GPUs. `install_fake_tools`
writes executables named npu-smi / nvidia-smi that print them, so the real detection code (PATH
lookup, subprocess, parser) runs unchanged in a real team-lead process.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

_HEAD = """+------------------------------------------------------------------------------------------------+
| npu-smi 23.0.6                   Version: 23.0.6                                               |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
"""
_CARD = """| {i}     910B3               | OK            | 95.3        36                0    / 0             |
| 0                         | 0000:{bus}:00.0  | 0           0    / 0          3395 / 65536         |
+===========================+===============+====================================================+
"""
_PROCESSES = """+---------------------------+---------------+----------------------------------------------------+
| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
| No running processes found in NPU 0                                                            |
+===========================+===============+====================================================+
"""
FAKE_NPU_SMI_8X64 = _HEAD + "".join(_CARD.format(i=i, bus=f"{0xC1 + i:02X}") for i in range(8)) + _PROCESSES
FAKE_NVIDIA_SMI_2X = "0, NVIDIA H200, 143771\n1, NVIDIA H200, 143771\n"


def install_fake_tools(folder: Path, npu_smi: str | None = None, nvidia_smi: str | None = None) -> str:
    """Write the fake tools into `folder`; returns a PATH that finds them first."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("npu-smi", npu_smi), ("nvidia-smi", nvidia_smi)):
        if text is None:
            continue
        (folder / f"{name}.out").write_text(text)
        tool = folder / name
        tool.write_text(f"#!/bin/sh\ncat '{folder / (name + '.out')}'\n")
        tool.chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"


def fake_runner(npu: str | None = None, nvidia: str | None = None) -> Callable[[list[str]], str | None]:
    """A probe runner (ascendbridge.workers.devices.Runner) that answers like a host with these
    tools' output (None: the tool is not installed), without running anything."""
    return lambda argv: {"npu-smi": npu, "nvidia-smi": nvidia}[argv[0]]
