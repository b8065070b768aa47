"""Framework paths and where torch comes from, read through the one settings model
(ascendbridge.settings: sections `paths` and `envs`; a `.env` file is loaded by the shell entry
points), with defaults relative to the repository root so a fresh clone works without configuration.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ascendbridge.pip_site import read_pip_site
from ascendbridge.settings import REPO_ROOT, EnvsSettings, PathSettings, section

__all__ = [
    "REPO_ROOT",
    "RUNTIME_DIR",
    "RUNTIME_NAME",
    "adaptations_dir",
    "board_path",
    "logs_dir",
    "stage_history_path",
    "torch_source",
    "uv_binary",
]

RUNTIME_NAME = "ab_runtime"
# The framework's runtime package, shipped verbatim into every package by the generator and checked
# against by the gates: named from the checkout, not from where `import ab_runtime` resolves (a
# worker runs in an adaptation's directory, where that is the package's own copy).
RUNTIME_DIR = REPO_ROOT / RUNTIME_NAME


def board_path() -> Path:
    """ASCENDBRIDGE_BOARD, default <repo>/board.db (inside a worker: the board it serves)."""
    return section(PathSettings).board


def adaptations_dir() -> Path:
    """ASCENDBRIDGE_ADAPTATIONS, default <repo>/adaptations."""
    return section(PathSettings).adaptations


def logs_dir() -> Path:
    """ASCENDBRIDGE_LOGS, default <repo>/logs."""
    return section(PathSettings).logs


def stage_history_path() -> Path:
    """ASCENDBRIDGE_STAGE_HISTORY, default $XDG_CACHE_HOME/ascendbridge/stage_history.json (~/.cache
    without XDG_CACHE_HOME): per user and host, shared by every board (ascendbridge/teamlead/history.py)."""
    explicit = section(PathSettings).stage_history
    if explicit is not None:
        return explicit.expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ascendbridge" / "stage_history.json"


def uv_binary() -> str:
    """The uv that manages adaptation environments: the framework's own dependency first."""
    explicit = section(EnvsSettings).uv
    if explicit:
        return explicit
    try:
        from uv import find_uv_bin  # the `uv` PyPI package ships its binary

        return find_uv_bin()
    except Exception:
        found = shutil.which("uv")
        if not found:
            raise RuntimeError("no uv binary found; install the framework with its dependencies") from None
        return found


def _pip_find_links() -> str | None:
    """The first local wheel directory among pip's configured find-links (offline machines, CI)."""
    return next((item for item in read_pip_site().find_links if Path(item).is_dir()), None)


@dataclass(frozen=True)
class TorchProfile:
    """How one device profile (extra) of an adaptation gets torch."""

    name: str
    requirements: tuple[str, ...]
    index_url: str | None = None  # a PyTorch index for this extra only, or None for PyPI


@dataclass(frozen=True)
class TorchSource:
    """Pins per device profile plus an optional local wheel directory (find-links)."""

    profiles: dict[str, TorchProfile] = field(default_factory=dict)
    wheel_dir: str | None = None

    def profile(self, name: str) -> TorchProfile:
        if name not in self.profiles:
            raise ValueError(f"unknown device profile '{name}' (expected one of: {', '.join(self.profiles)})")
        return self.profiles[name]


def torch_source() -> TorchSource:
    """Pins from ASCENDBRIDGE_TORCH_{CPU,CUDA,ASCEND}, ASCENDBRIDGE_TORCH_NPU, and the wheel
    directory from ASCENDBRIDGE_WHEEL_DIR ('auto' = pip's configured find-links, 'none' = PyPI)."""
    envs = section(EnvsSettings)
    cpu, cuda, ascend, npu = envs.torch_cpu, envs.torch_cuda, envs.torch_ascend, envs.torch_npu
    wheel_setting = envs.wheel_dir
    if wheel_setting == "auto":
        wheel_dir = _pip_find_links()
    elif wheel_setting in ("", "none"):
        wheel_dir = None
    else:
        if not Path(wheel_setting).is_dir():
            raise ValueError(f"ASCENDBRIDGE_WHEEL_DIR={wheel_setting} is not a directory")
        wheel_dir = wheel_setting
    cpu_index = None if wheel_dir else envs.torch_cpu_index
    profiles = {
        "cpu": TorchProfile("cpu", (f"torch=={cpu}",), cpu_index),
        "cuda": TorchProfile("cuda", (f"torch=={cuda}",)),
        "ascend": TorchProfile("ascend", (f"torch=={ascend}", f"torch-npu=={npu}")),
    }
    return TorchSource(profiles=profiles, wheel_dir=wheel_dir)
