"""Session fixtures for the benchmark tests: the torch interpreter and three real accuracy runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmark.bench_support import make_adaptation, run_accuracy
from tests.support.torch_env import torch_env_python


@pytest.fixture(scope="session")
def python() -> Path:
    return torch_env_python()


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory, python: Path) -> dict[str, tuple[Path, int, dict, str, str]]:
    """One accuracy_run per tiny model, in the spec's target dtype (bfloat16 for the GPT-2)."""
    root = tmp_path_factory.mktemp("bench")
    out = {}
    for name in ("tiny-bert", "tiny-gpt2", "tiny-vit"):
        directory = make_adaptation(root, name)
        code, result, stdout, stderr = run_accuracy(python, directory, "--device", "cpu")
        out[name] = (directory, code, result, stdout, stderr)
    return out
