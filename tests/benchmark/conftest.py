"""Session fixtures for the benchmark tests: the torch interpreter and three real accuracy runs."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
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
    names = ("tiny-bert", "tiny-gpt2", "tiny-vit")
    dirs = {name: make_adaptation(root, name) for name in names}
    with ThreadPoolExecutor(max_workers=len(names)) as pool:  # separate processes; torch import dominates
        done = {name: pool.submit(run_accuracy, python, dirs[name], "--device", "cpu") for name in names}
    return {name: (dirs[name], *done[name].result()) for name in names}
