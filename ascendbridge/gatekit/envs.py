"""Run framework-owned scripts in an adaptation's interpreter (the env that has torch).

The framework has no torch, so anything that loads tensors (the gate's recomputation, `compare`,
the environment probe) runs a script from `ascendbridge/gatekit/inner/` with the adaptation's Python. The
script comes from this repository; only the interpreter comes from the adaptation.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from ascendbridge.stable_envs import python as package_python
from ascendbridge.workers.process import CommandResult, run_command

INNER_DIR = Path(__file__).resolve().parent / "inner"
# The one list of variables stripped from every model run's environment: each would point the run
# at another environment than the adaptation's own .venv (e.g. the framework's, when the framework
# itself runs under `uv run`).
STRIPPED_ENV = ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "CONDA_PREFIX", "PYTHONHOME", "PYTHONPATH")


def model_run_env(extra: Mapping[str, str] | None = None, drop: Sequence[str] = ()) -> dict[str, str]:
    """This process's environment for a model run: without STRIPPED_ENV (and `drop`), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in STRIPPED_ENV and k not in drop}
    env.update(extra or {})
    return env


class EnvError(RuntimeError):
    """No usable interpreter for an adaptation."""


def adaptation_python(adaptation_dir: Path, override: str | None = None) -> Path:
    """`override` if given, else the adaptation's synced environment's (its own `.venv`, else the
    stable environment of its lock: ascendbridge.stable_envs)."""
    if override:
        path = Path(override).absolute()  # not resolve(): a venv's python is a symlink to keep
        if not path.is_file():
            raise EnvError(f"--python {override}: no such interpreter")
        return path
    python = package_python(Path(adaptation_dir))
    if not python.is_file():
        raise EnvError(
            f"{adaptation_dir} has no synced environment (.venv); run "
            f"`uv sync --extra cpu` there (or --extra ascend / cuda) first"
        )
    return python


def run_inner(
    python: Path, script: str, args: Sequence[str], cwd: Path | None = None, timeout_s: float = 600.0
) -> CommandResult:
    """`python -E -s ascendbridge/gatekit/inner/<script> ARGS`: no env-var paths, no user site-packages."""
    if not Path(python).is_file():
        raise EnvError(f"interpreter {python} does not exist")
    return run_command(
        [str(python), "-E", "-s", str(INNER_DIR / script), *args], cwd=cwd, env=model_run_env(), timeout_s=timeout_s
    )
