"""Load framework-owned runtime modules by file path (never the adaptation's copies)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parents[3]
RUNTIME_DIR = REPO_ROOT / "ab_runtime"


def framework_module(name: str) -> ModuleType:
    """Import `ab_runtime/<name>.py` of THIS repository under a private name."""
    path = RUNTIME_DIR / f"{name}.py"
    key = f"ascendbridge_framework_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module  # dataclasses resolve their module through sys.modules
    spec.loader.exec_module(module)
    return module
