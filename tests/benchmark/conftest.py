"""Session fixtures for the benchmark tests: the torch interpreter, three real accuracy runs, and
one recorded as the stage records it (the evidence the forging tests forge)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bench.support.tiny_adaptations import make_adaptation, record_as_the_stage, run_accuracy
from bench.support.torch_env import torch_env_python


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


@pytest.fixture(scope="session")
def stage_run(tmp_path_factory: pytest.TempPathFactory, python: Path) -> Path:
    """tiny-bert's evidence recorded alone on one core, as the stage records it
    (tiny_adaptations.record_as_the_stage): a figure forged 10x from it is 10x below the real one."""
    directory = make_adaptation(tmp_path_factory.mktemp("stage-run"), "tiny-bert")
    code, result, stdout, stderr = record_as_the_stage(python, directory, [max(os.sched_getaffinity(0))])
    assert code == 0 and result.get("ok"), stdout + stderr
    return directory
