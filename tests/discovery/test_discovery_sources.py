"""Discovery from a local directory, a real HF-cache layout (offline, through huggingface_hub),
and the Hub's error paths that can be exercised without the network."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from ascendbridge.demo_models import list_demo_models
from ascendbridge.discovery.discover import discover
from ascendbridge.discovery.errors import DiscoveryError

COMMIT = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"


@pytest.mark.parametrize("demo", list_demo_models(), ids=lambda d: d.name)
def test_each_demo_model(demo) -> None:
    info = discover(demo.model_id, "local", str(demo.path))
    assert info.task_family == demo.task_family, info.task_family_reason
    assert info.architectures == [demo.architecture] and info.model_class == demo.architecture
    assert info.parameter_count_source == "config_estimate" and not info.has_weights
    # The estimate from config.json alone is close to the count of the instantiated model.
    assert abs(info.parameter_count - demo.parameters) / demo.parameters < 0.2
    assert info.num_layers == 2 and info.dtype == "float32" and not info.needs_remote_code


def test_real_minilm_directory(minilm_dir: Path) -> None:
    info = discover("sentence-transformers/all-MiniLM-L6-v2", "local", str(minilm_dir))
    assert (info.task_family, info.model_class) == ("feature_extraction", "BertModel")
    assert (info.parameter_count, info.parameter_count_source, info.dtype) == (22_713_216, "safetensors", "float32")
    assert info.size_bytes == (minilm_dir / "model.safetensors").stat().st_size
    assert info.license == "apache-2.0" and info.has_tokenizer and not info.has_processor
    assert (info.sentence_transformers_pooling, info.sentence_transformers_normalize) == ("mean", True)
    assert info.num_layers == 6 and info.weight_files == ["model.safetensors"]


@pytest.fixture()
def minilm_cache(tmp_path: Path, minilm_dir: Path, hf_cache_builder) -> Path:
    cache = tmp_path / "hf-home" / "hub"
    hf_cache_builder(cache, "sentence-transformers/all-MiniLM-L6-v2", minilm_dir, COMMIT)
    return cache


def test_hf_cache_layout_offline(minilm_cache: Path, cli) -> None:
    """HF_HOME points at the layout; HF_HUB_OFFLINE=1; huggingface_hub resolves refs/main."""
    proc = cli(
        "sentence-transformers/all-MiniLM-L6-v2",
        "--source",
        "hf-cache",
        "--json",
        env={"HF_HOME": str(minilm_cache.parent), "HF_HUB_CACHE": ""},
    )
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["source"] == "hf-cache" and info["resolved_revision"] == COMMIT
    assert info["parameter_count"] == 22_713_216 and info["parameter_count_source"] == "safetensors"
    assert info["local_dir"].endswith(f"snapshots/{COMMIT}")
    assert info["size_bytes"] == 90_868_376  # through the snapshot's symlinks into blobs/
    assert info["sentence_transformers_pooling"] == "mean" and info["has_tokenizer"]


def test_hub_source_offline_reads_the_cache(minilm_cache: Path, cli) -> None:
    proc = cli("sentence-transformers/all-MiniLM-L6-v2", "--json", env={"HF_HUB_CACHE": str(minilm_cache)})
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["source"] == "huggingface" and info["parameter_count"] == 22_713_216
    assert any("HF_HUB_OFFLINE" in w for w in info["warnings"])


def test_cache_revision_by_commit_and_missing_revision(tmp_path: Path, minilm_cache: Path) -> None:
    info = discover("sentence-transformers/all-MiniLM-L6-v2", "hf-cache", str(minilm_cache), revision=COMMIT)
    assert info.resolved_revision == COMMIT
    with pytest.raises(DiscoveryError, match="not in the local HF cache") as err:
        discover("sentence-transformers/all-MiniLM-L6-v2", "hf-cache", str(minilm_cache), revision="v9")
    assert err.value.rule == "not_in_cache"


def test_config_only_cache_snapshot(tmp_path: Path, hf_cache_builder) -> None:
    demo = next(d for d in list_demo_models() if d.name == "tiny-llama")
    cache = tmp_path / "hub"
    hf_cache_builder(cache, "demo/tiny-llama", demo.path, COMMIT)
    info = discover("demo/tiny-llama", "hf-cache", str(cache))
    assert info.task_family == "causal_lm" and not info.has_weights
    assert any("no weights" in w for w in info.warnings)


def test_model_not_in_cache(tmp_path: Path, cli) -> None:
    proc = cli("org/absent", "--source", "hf-cache", "--path", str(tmp_path))
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"error: model org/absent is not in the local HF cache ({tmp_path})"


def test_hub_unreachable_is_one_line_and_fast(cli) -> None:
    started = time.monotonic()
    proc = cli(
        "openai-community/gpt2",
        env={"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9", "ASCENDBRIDGE_HUB_TIMEOUT": "3"},
    )
    assert proc.returncode == 3
    assert proc.stderr.startswith("error: cannot reach the Hugging Face Hub at http://127.0.0.1:9")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert time.monotonic() - started < 60


def test_missing_local_directory(tmp_path: Path) -> None:
    with pytest.raises(DiscoveryError, match="does not exist") as err:
        discover("x/y", "local", str(tmp_path / "nope"))
    assert err.value.rule == "missing_directory"


def test_directory_without_config(tmp_path: Path) -> None:
    with pytest.raises(DiscoveryError, match="no config.json"):
        discover("x/y", "local", str(tmp_path))


def test_non_safetensors_weights_fall_back_to_estimate(tmp_path: Path, model_writer) -> None:
    demo = next(d for d in list_demo_models() if d.name == "tiny-bert")
    model_writer(tmp_path, json.loads((demo.path / "config.json").read_text()))
    (tmp_path / "pytorch_model.bin").write_bytes(b"\0" * 1000)
    info = discover("x/bert", "local", str(tmp_path))
    assert info.has_weights and info.weight_files == ["pytorch_model.bin"] and info.size_bytes == 1000
    assert info.parameter_count_source == "config_estimate"
    assert any("not safetensors" in w for w in info.warnings)


def test_copied_model_is_identical_to_the_original(tmp_path: Path, minilm_dir: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(minilm_dir, copy)
    a = discover("a/m", "local", str(minilm_dir)).model_dump(exclude={"local_dir"})
    b = discover("a/m", "local", str(copy)).model_dump(exclude={"local_dir"})
    assert a == b
