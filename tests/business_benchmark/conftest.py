"""Session fixtures: the torch interpreter, the real MiniLM business run, six tiny agreement-only runs."""

from __future__ import annotations

import io
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ascendbridge.demo_models import ensure_minilm, list_demo_models
from bench.support.torch_env import torch_env_python
from tests.business_benchmark.business_support import demo_dir, make_adaptation, run_business

# One intra-op thread per run: on a shared 2-core machine two threads per process thrash (30x slower).
THREADS = ("--threads", "1")
_DEMOS = {demo.name: demo for demo in list_demo_models()}
# name -> (family, class): config-only demo models, as their manifest records them, and a tiny Qwen2.5-VL
TINY = {
    **{
        name: (_DEMOS[name].task_family, _DEMOS[name].architecture)
        for name in ("tiny-gpt2", "tiny-t5", "tiny-bert-classifier", "tiny-vit", "tiny-whisper")
    },
    "tiny-qwen-vl": ("image_text_to_text", "Qwen2_5_VLForConditionalGeneration"),
}


@pytest.fixture(scope="session")
def python() -> Path:
    return torch_env_python()


@pytest.fixture(scope="session")
def minilm(tmp_path_factory: pytest.TempPathFactory, python: Path) -> tuple[Path, Path]:
    """(adaptation dir, metrics file) of the real all-MiniLM-L6-v2, CPU bfloat16 vs CPU float32."""
    log = io.StringIO()
    model_dir = ensure_minilm(log=log)
    if model_dir is None:
        pytest.skip(f"all-MiniLM-L6-v2 unavailable: {log.getvalue().strip()}")
    directory = make_adaptation(
        tmp_path_factory.mktemp("business"),
        "all-minilm-l6-v2",
        model_dir,
        "feature_extraction",
        "BertModel",
        has_weights=True,
        pooling="mean",
        model_id="sentence-transformers/all-MiniLM-L6-v2",
    )
    metrics, _, _ = run_business(
        python,
        directory,
        "feature_extraction",
        pretrained=True,
        sentence_transformers=True,
        extra=THREADS,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    return directory, metrics


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory: pytest.TempPathFactory, python: Path) -> dict[str, tuple[Path, Path]]:
    """Config-only demo models (no weights, no tokenizer) and a tiny Qwen2.5-VL (an issue-13 family:
    agreement on its seeded image + text inputs), 4 items per set, run in parallel."""
    from tests.benchmark.test_benchmark_vision import MODELS

    root = tmp_path_factory.mktemp("business-tiny")
    models = {name: demo_dir(name) for name in TINY}
    models["tiny-qwen-vl"] = root / "models" / "tiny-qwen-vl"
    models["tiny-qwen-vl"].mkdir(parents=True)
    (models["tiny-qwen-vl"] / "config.json").write_text(json.dumps(MODELS["qwen2.5-vl"][0]))
    dirs = {name: make_adaptation(root, name, models[name], family, cls) for name, (family, cls) in TINY.items()}
    with ThreadPoolExecutor(max_workers=len(TINY)) as pool:
        done = {
            name: pool.submit(run_business, python, dirs[name], TINY[name][0], extra=(*THREADS, "--max-items", "4"))
            for name in TINY
        }
    return {name: (dirs[name], done[name].result()[0]) for name in TINY}
