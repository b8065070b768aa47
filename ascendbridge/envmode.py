"""Environment modes of model runs: `locked` (the package's uv.lock) or `system` (a venv layered
on an interpreter that already has torch / torch_npu, e.g. an Ascend host's vendor stack).

The team lead takes the mode per run (`--env system --python PATH`, which sets these variables
for every worker) and per model from the board (models.env_mode / env_python, which win).
Kept in the kernel so the team lead can validate its flags without importing a stage package.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

ENV_MODES: tuple[str, ...] = ("locked", "system")
ENV_MODE_VAR = "ASCENDBRIDGE_ENV"
SYSTEM_PYTHON_VAR = "ASCENDBRIDGE_SYSTEM_PYTHON"


class EnvModeError(ValueError):
    """A bad mode or a missing system interpreter; shown as one line."""


@dataclass(frozen=True)
class EnvChoice:
    """How one model's environment is made: the mode and, for `system`, the base interpreter."""

    mode: str = "locked"
    python: Optional[Path] = None

    @property
    def system(self) -> bool:
        return self.mode == "system"


def env_choice(model_mode: Optional[str] = None, model_python: Optional[str] = None) -> EnvChoice:
    """The model's own mode (board) wins over the run's (ASCENDBRIDGE_ENV / _SYSTEM_PYTHON)."""
    mode = (model_mode or os.environ.get(ENV_MODE_VAR) or "locked").strip().lower()
    if mode not in ENV_MODES:
        raise EnvModeError(f"unknown environment mode '{mode}' (expected one of: {', '.join(ENV_MODES)})")
    if mode == "locked":
        return EnvChoice("locked")
    raw = model_python or os.environ.get(SYSTEM_PYTHON_VAR)
    if not raw:
        raise EnvModeError(f"environment mode 'system' needs an interpreter (--python PATH or {SYSTEM_PYTHON_VAR})")
    python = Path(raw).expanduser()
    if not python.is_file() or not os.access(python, os.X_OK):
        raise EnvModeError(f"system interpreter {raw} does not exist or is not executable")
    return EnvChoice("system", python.absolute())


def use_model_env(model: object) -> None:
    """Make a model's own mode (board: env_mode / env_python) the mode of this worker process.

    A stage calls this first in `run`; one process runs one task, so the process environment is
    the model's, and every uv_env.sync below (and the gates it starts) follows it."""
    mode = getattr(model, "env_mode", "") or ""
    if mode:
        os.environ[ENV_MODE_VAR] = mode
        python = getattr(model, "env_python", None)
        if python:
            os.environ[SYSTEM_PYTHON_VAR] = python
