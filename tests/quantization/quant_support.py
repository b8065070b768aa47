"""What the quantization tests share: the tool environment (the stage's own pins, in the cached test
torch environment), a tiny causal LM with seeded random weights, and the reference evaluation run
as a process."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from ascendbridge.config import REPO_ROOT
from bench.support.torch_env import torch_env_python
from quantization.env import TOOL_PINS

HERE = Path(__file__).resolve().parent


def quant_env_python() -> Path:
    """The test torch environment with the stage's tools (msModelSlim, LLM-Compressor) added."""
    return torch_env_python(extra=TOOL_PINS)


def make_tiny_llama(python: Path, target: Path) -> Path:
    """demo/tiny-llama32 with seeded random weights and its tokenizer, saved at `target`."""
    run([python, HERE / "make_tiny_causal.py", REPO_ROOT / "demo_models" / "tiny-llama32", target])
    return target


def with_runtime() -> dict[str, str]:
    """The environment of a process that imports the checkout's ab_runtime."""
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


def run(argv: list[Any], timeout: int = 300, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return proc.stdout


def evaluate(python: Path, model: Path, quantized: Path) -> tuple[int, dict[str, Any] | None, str]:
    """`python -m ab_runtime.quant.evaluate --json`: (exit code, its report when it judged, stderr)."""
    proc = subprocess.run(
        [
            str(python),
            "-m",
            "ab_runtime.quant.evaluate",
            "--model",
            str(model),
            "--quantized",
            str(quantized),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
        env=with_runtime(),
    )
    report = json.loads(proc.stdout) if proc.returncode in (0, 1) else None
    return proc.returncode, report, proc.stderr
