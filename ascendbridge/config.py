"""Framework settings: where the board, logs and adaptations live, and where torch comes from.

Everything is read from the environment (a `.env` file is loaded by the shell entry points), with
defaults relative to the repository root so a fresh clone works without configuration.
"""

from __future__ import annotations

import configparser
import os
import shutil
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def _env_path(name: str, default: Path) -> Path:
    raw = os.environ.get(name)
    return Path(raw).expanduser().resolve() if raw else default


def board_path() -> Path:
    """ASCENDBRIDGE_BOARD, default <repo>/board.db."""
    return _env_path("ASCENDBRIDGE_BOARD", REPO_ROOT / "board.db")


def adaptations_dir() -> Path:
    """ASCENDBRIDGE_ADAPTATIONS, default <repo>/adaptations."""
    return _env_path("ASCENDBRIDGE_ADAPTATIONS", REPO_ROOT / "adaptations")


def logs_dir() -> Path:
    """ASCENDBRIDGE_LOGS, default <repo>/logs."""
    return _env_path("ASCENDBRIDGE_LOGS", REPO_ROOT / "logs")


def uv_binary() -> str:
    """The uv that manages adaptation environments: the framework's own dependency first."""
    explicit = os.environ.get("ASCENDBRIDGE_UV")
    if explicit:
        return explicit
    try:
        from uv import find_uv_bin  # the `uv` PyPI package ships its binary

        return find_uv_bin()
    except Exception:
        found = shutil.which("uv")
        if not found:
            raise RuntimeError("no uv binary found; install the framework with its dependencies")
        return found


PIP_CONFIG_FILES = (
    Path("/etc/pip.conf"),
    Path("/etc/xdg/pip/pip.conf"),
    Path.home() / ".pip" / "pip.conf",
    Path.home() / ".config" / "pip" / "pip.conf",
)


@lru_cache(maxsize=1)
def _pip_find_links() -> str | None:
    """The local wheel directory pip is configured with, if any (offline machines, CI).

    Read from PIP_FIND_LINKS or pip's config files directly: the framework venv has no pip.
    """
    candidates: list[str] = []
    if os.environ.get("PIP_FIND_LINKS"):
        candidates.append(os.environ["PIP_FIND_LINKS"])
    for path in PIP_CONFIG_FILES:
        parser = configparser.ConfigParser()
        try:
            parser.read(path)
        except configparser.Error:
            continue
        for section in ("global", "install"):
            if parser.has_option(section, "find-links"):
                candidates.append(parser.get(section, "find-links"))
    for value in candidates:
        for item in value.split():
            if Path(item).is_dir():
                return item
    return None


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


DEFAULT_TORCH_CPU = "2.13.0"
DEFAULT_TORCH_CUDA = "2.9.1"
# torch-npu releases pair with torch releases; 2.7.1.post2 is a published pairing.
DEFAULT_TORCH_ASCEND = "2.7.1"
DEFAULT_TORCH_NPU = "2.7.1.post2"


def torch_source() -> TorchSource:
    """Read pins from ASCENDBRIDGE_TORCH_{CPU,CUDA,ASCEND}, ASCENDBRIDGE_TORCH_NPU, and the wheel
    directory from ASCENDBRIDGE_WHEEL_DIR ('auto' = pip's configured find-links, 'none' = PyPI)."""
    cpu = os.environ.get("ASCENDBRIDGE_TORCH_CPU", DEFAULT_TORCH_CPU)
    cuda = os.environ.get("ASCENDBRIDGE_TORCH_CUDA", DEFAULT_TORCH_CUDA)
    ascend = os.environ.get("ASCENDBRIDGE_TORCH_ASCEND", DEFAULT_TORCH_ASCEND)
    npu = os.environ.get("ASCENDBRIDGE_TORCH_NPU", DEFAULT_TORCH_NPU)
    wheel_setting = os.environ.get("ASCENDBRIDGE_WHEEL_DIR", "auto")
    if wheel_setting == "auto":
        wheel_dir = _pip_find_links()
    elif wheel_setting in ("", "none"):
        wheel_dir = None
    else:
        if not Path(wheel_setting).is_dir():
            raise ValueError(f"ASCENDBRIDGE_WHEEL_DIR={wheel_setting} is not a directory")
        wheel_dir = wheel_setting
    cpu_index = None if wheel_dir else os.environ.get(
        "ASCENDBRIDGE_TORCH_CPU_INDEX", "https://download.pytorch.org/whl/cpu"
    )
    profiles = {
        "cpu": TorchProfile("cpu", (f"torch=={cpu}",), cpu_index),
        "cuda": TorchProfile("cuda", (f"torch=={cuda}",)),
        "ascend": TorchProfile("ascend", (f"torch=={ascend}", f"torch-npu=={npu}")),
    }
    return TorchSource(profiles=profiles, wheel_dir=wheel_dir)
