"""Environment modes of model runs: `locked` (the package's uv.lock) or `system` (a venv layered
on an interpreter that already has torch / torch_npu, e.g. an Ascend host's vendor stack).

The team lead takes the mode per run (`--env system --python PATH`, or ASCENDBRIDGE_ENV /
ASCENDBRIDGE_SYSTEM_PYTHON: the `envs` section of ascendbridge.settings, which reaches every worker
as its typed settings) and per model from the board (models.env_mode / env_python, which win).
Kept in the kernel so the team lead can validate its flags without importing a stage package.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ascendbridge.settings import EnvsSettings, install, installed, section

ENV_MODES: tuple[str, ...] = ("locked", "system")
SYSTEM_MARKER = "ascendbridge-env.json"  # in a system-mode .venv: mode, base interpreter, stack, installed
ENV_MODE_VAR = "ASCENDBRIDGE_ENV"
SYSTEM_PYTHON_VAR = "ASCENDBRIDGE_SYSTEM_PYTHON"


class EnvModeError(ValueError):
    """A bad mode or a missing system interpreter; shown as one line."""


@dataclass(frozen=True)
class EnvChoice:
    """How one model's environment is made: the mode and, for `system`, the base interpreter."""

    mode: str = "locked"
    python: Path | None = None

    @property
    def system(self) -> bool:
        return self.mode == "system"


def env_choice(
    model_mode: str | None = None, model_python: str | None = None, run: EnvsSettings | None = None
) -> EnvChoice:
    """The model's own mode (board) wins over the run's (`run`, else this process's settings)."""
    try:
        run = run or section(EnvsSettings)
    except ValueError as exc:  # a bad ASCENDBRIDGE_ENV: the same one line as a bad mode
        raise EnvModeError(str(exc)) from None
    mode = (model_mode or run.env).strip().lower()
    if mode not in ENV_MODES:
        raise EnvModeError(f"unknown environment mode '{mode}' (expected one of: {', '.join(ENV_MODES)})")
    if mode == "locked":
        return EnvChoice("locked")
    raw = model_python or run.system_python
    if not raw:
        raise EnvModeError(f"environment mode 'system' needs an interpreter (--python PATH or {SYSTEM_PYTHON_VAR})")
    python = Path(raw).expanduser()
    if not python.is_file() or not os.access(python, os.X_OK):
        raise EnvModeError(f"system interpreter {raw} does not exist or is not executable")
    return EnvChoice("system", python.absolute())


def use_model_env(model: object) -> None:
    """Make a model's own mode (board: env_mode / env_python) the mode of this worker process.

    A stage calls this first in `run` and `gate`; one process runs one task, so the worker's
    settings become the model's and every uv_env.sync below follows them. A stage run without a
    worker (by hand, in a test) has no installed settings: there the process environment, which
    its settings are read from, takes the model's mode."""
    mode = getattr(model, "env_mode", "") or ""
    if not mode:
        return
    python = getattr(model, "env_python", None)
    current = installed()
    if current is not None:
        update = {"env": mode, **({"system_python": python} if python else {})}
        install(current.replace(current.of(EnvsSettings).model_copy(update=update)))
        return
    os.environ[ENV_MODE_VAR] = mode
    if python:
        os.environ[SYSTEM_PYTHON_VAR] = python
