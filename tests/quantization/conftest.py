"""The quantization tests' module fixtures: the tool environment and a tiny causal LM made in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.quantization.quant_support import make_tiny_llama, quant_env_python


@pytest.fixture(scope="module")
def quant_python() -> Path:
    return quant_env_python()


@pytest.fixture(scope="module")
def model_dir(quant_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_llama(quant_python, tmp_path_factory.mktemp("model") / "tiny-llama32")
