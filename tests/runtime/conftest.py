"""Session fixtures for runtime tests: the shared torch env and the tiny model directories."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench.support.torch_env import torch_env_python

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def torch_python() -> Path:
    return torch_env_python()


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory, torch_python: Path) -> dict[str, dict[str, Any]]:
    """name -> manifest entry ({name, group, family, model_class, path}) from tiny_models.py."""
    out = tmp_path_factory.mktemp("tiny-models")
    proc = subprocess.run(
        [str(torch_python), str(HERE / "tiny_models.py"), str(out)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {entry["name"]: entry for entry in json.loads(proc.stdout.splitlines()[-1])}
