"""A host tool's output (`npu-smi`, `nvidia-smi`): the team lead's device inventory and the gates'
software-stack probe ask the same tools the same way. Standard library only: the framework
imports this file, and the gate's inner scripts load it in a package's interpreter."""

from __future__ import annotations

import shutil
import subprocess

TOOL_TIMEOUT_S = 20.0


def run_tool(argv: list[str], timeout_s: float = TOOL_TIMEOUT_S) -> str | None:
    """The tool's stdout; None when it is not installed, fails or hangs (a host without that kind)."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None
