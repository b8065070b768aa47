"""The real-size configs under sized_models/: what discovery reads of them (the real discovery library
on the committed directories), their registration file, and the parameter counts their manifest
records (the models built on the meta device by scripts/make_demo_models.py --sized)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascendbridge.config import REPO_ROOT
from ascendbridge.discovery.config_estimate import proxy_depth_problem, proxy_parameters
from ascendbridge.discovery.discover import discover
from ascendbridge.registration_file import parse_registration_file

SIZED = REPO_ROOT / "sized_models"
MANIFEST = json.loads((SIZED / "manifest.json").read_text())["models"]
# The published sizes the configs must keep (issue 51): layers, hidden size, vocabulary.
PUBLISHED = {
    "qwen3-0.6b": (28, 1024, 151936),
    "qwen2.5-1.5b": (28, 1536, 151936),
    "bert-base-uncased": (12, 768, 30522),
    "vit-base-patch16-224": (12, 768, None),
    "whisper-small": (12, 768, 51865),
}


def test_manifest_matches_the_folders_and_the_published_sizes() -> None:
    folders = {p.name for p in SIZED.iterdir() if p.is_dir()}
    assert folders == set(MANIFEST) == set(PUBLISHED)
    for name, (layers, hidden, vocab) in PUBLISHED.items():
        config = json.loads((SIZED / name / "config.json").read_text())
        assert config["architectures"] == [MANIFEST[name]["architecture"]]
        assert config["num_hidden_layers"] == layers == MANIFEST[name]["layers"]
        assert config.get("hidden_size", config.get("d_model")) == hidden
        assert config.get("vocab_size") == vocab
        assert not any(p.suffix in (".safetensors", ".bin") for p in (SIZED / name).iterdir())  # config only
    assert MANIFEST["qwen3-0.6b"]["parameters"] == 596_049_920  # Qwen3-0.6B's own count
    assert MANIFEST["qwen2.5-1.5b"]["parameters"] == 1_543_714_304  # Qwen2.5-1.5B's published 1.54 B


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_discovery_reads_each_as_the_model_it_is(name: str) -> None:
    entry = MANIFEST[name]
    info = discover(entry["model_id"], "local", str(SIZED / name))
    assert info.architectures == [entry["architecture"]] and info.task_family == entry["task_family"]
    assert info.num_layers == entry["layers"] and not info.has_weights
    assert info.parameter_count_source == "config_estimate"
    assert info.parameter_count == pytest.approx(entry["parameters"], rel=0.02)  # the estimate the plans use


def test_the_registration_file_registers_every_config_from_anywhere() -> None:
    regs = parse_registration_file(SIZED / "models.jsonl")
    assert sorted(r.model_id for r in regs) == sorted(m["model_id"] for m in MANIFEST.values())
    assert all(r.source == "local" and Path(r.path or "").parent == SIZED for r in regs)


def test_a_proxy_is_checked_and_sized_against_the_config() -> None:
    """What discovery refuses and what a memory plan counts for `--depth N`: 1 to the model's layers,
    about the parameters the proxy builds (embeddings stay, the cut layers go)."""
    qwen = json.loads((SIZED / "qwen3-0.6b" / "config.json").read_text())
    assert proxy_depth_problem(None, qwen) is None and proxy_depth_problem(28, qwen) is None
    assert proxy_depth_problem(29, qwen) == "depth 29 is not within the model's 28 layers (a proxy builds 1 to 28)"
    full = MANIFEST["qwen3-0.6b"]["parameters"]
    # 187,045,376: Qwen3-0.6B cut to 2 layers by ab_runtime.depth.proxy_config, counted on the meta device
    assert proxy_parameters(full, qwen, 2) == pytest.approx(187_045_376, rel=0.01)
    assert proxy_parameters(full, qwen, 28) == full
