"""The training tests' torch environment: the shared cached one (bench/support/torch_env.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.support.torch_env import torch_env_python


@pytest.fixture(scope="session")
def torch_python() -> Path:
    return torch_env_python()
