"""The quantization tool's own uv environment (never the framework's: the framework has no torch).

It holds the two quantization tools, msModelSlim and LLM-Compressor (with compressed-tensors), with
CPU torch (the framework's pin, from the local wheel directory when pip is configured with one),
transformers and safetensors; the export and the reference evaluation (ab_runtime.serve.export,
ab_runtime.quant.evaluate) run in it too. Never in the serve environment: vLLM's guide keeps
LLM-Compressor in an environment of its own. The stage installs it on first need, and completes an
environment made for other pins; to install it ahead (CI, a host without network later):

    uv run python -m quantization.env            # 2 s from a warm uv cache
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from ascendbridge.cli_errors import CliError, OneLineParser, run_guarded
from ascendbridge.config import REPO_ROOT, torch_source, uv_binary
from ascendbridge.workers.process import run_command

DEFAULT_ENV = REPO_ROOT / ".cache" / "quant-env"
TOOL = "msmodelslim"
TOOL_VERSION = "26.1.0"
CT_TOOL = "llmcompressor"
CT_TOOL_VERSION = "0.14.0.1"  # brings compressed-tensors 0.19.0 and caps transformers at 5.17.0
# The tools' own requirements come with them (accelerate, datasets, easydict, pydantic, scipy, ...).
TOOL_PINS = (f"{TOOL}=={TOOL_VERSION}", f"{CT_TOOL}=={CT_TOOL_VERSION}")
REQUIREMENTS = (*TOOL_PINS, "transformers>=4.46", "safetensors>=0.4", "numpy>=1.26")
INSTALL_TIMEOUT_S = 1800.0
COMPLETE = ".complete"  # written last, naming the requirements: a half-made or older environment is completed


class ToolEnvError(RuntimeError):
    """The tool environment is missing or could not be made."""


def tool_python(configured: str = "") -> Path:
    """The interpreter of the tool environment: the setting, else the default location."""
    return Path(configured) if configured else DEFAULT_ENV / "bin" / "python"


def tool_binary(python: Path) -> Path:
    """The `msmodelslim` command beside the interpreter."""
    return python.parent / TOOL


def ready(configured: str = "", log: TextIO | None = sys.stdout) -> Path:
    """The tool environment's interpreter, installing the default one first (progress to `log`)
    when it is missing, incomplete or made for other requirements; ToolEnvError for a configured
    interpreter without the tools."""
    python = tool_python(configured)
    if configured:
        if not tool_binary(python).is_file():
            raise ToolEnvError(f"quantization.python {configured} has no {TOOL} beside it")
        return python
    marker = DEFAULT_ENV / COMPLETE
    if not marker.is_file() or marker.read_text() != _marker_text():
        install(DEFAULT_ENV, log)
    return python


def _marker_text() -> str:
    return " ".join(REQUIREMENTS) + "\n"


def install(directory: Path = DEFAULT_ENV, log: TextIO | None = sys.stdout) -> Path:
    """Create (or complete) the tool environment at `directory`, printing each step; its interpreter."""
    uv = uv_binary()
    python = directory / "bin" / "python"
    source = torch_source()
    cpu = source.profile("cpu")
    where = ["--find-links", source.wheel_dir] if source.wheel_dir else []
    if not source.wheel_dir and cpu.index_url:
        where = ["--index-url", cpu.index_url, "--extra-index-url", "https://pypi.org/simple"]
        where += ["--index-strategy", "unsafe-best-match"]
    steps = [] if python.is_file() else [[uv, "venv", "--python", "3.11", str(directory)]]
    steps.append([uv, "pip", "install", "--python", str(python), *where, *cpu.requirements, *REQUIREMENTS])
    for argv in steps:
        if log is not None:
            print(f"quantization tool environment: {' '.join(argv[:3])} ...", file=log, flush=True)
        result = run_command(argv, timeout_s=INSTALL_TIMEOUT_S, log=log)
        if not result.ok:
            raise ToolEnvError(f"{' '.join(argv[:3])} failed: {result.tail_line()}")
    (directory / COMPLETE).write_text(_marker_text())
    return python


def main(argv: list[str]) -> int:
    parser = OneLineParser(
        description="Install the quantization stage's tool environment (msModelSlim, LLM-Compressor)."
    )
    parser.add_argument("--dir", type=Path, default=DEFAULT_ENV, help=f"where (default {DEFAULT_ENV})")
    args = parser.parse_args(argv)

    def command() -> int:
        try:
            print(f"quantization tool environment ready: {install(args.dir)}")
        except ToolEnvError as exc:
            raise CliError(str(exc), code=1) from None
        return 0

    return run_guarded(command)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
