"""The Hub source through the real huggingface_hub client, against FakeHubServer (the Hub
itself is unreachable here): config and headers only, never the weights; gated repos."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ascendbridge.board import BoardStore
from ascendbridge.board.records import Registration
from ascendbridge.discovery.discover import discover
from discovery.stage import DISCOVERY_STAGE

COMMIT = "a" * 40
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def test_hub_reads_headers_not_weights(fake_hub, minilm_dir: Path, tmp_path: Path) -> None:
    fake_hub.add(MINILM, minilm_dir, COMMIT)
    info = discover(MINILM, "huggingface")
    assert (info.parameter_count, info.parameter_count_source, info.dtype) == (22_713_216, "safetensors", "float32")
    assert info.resolved_revision == COMMIT and info.gated is False and info.license == "apache-2.0"
    assert info.size_bytes == 90_868_376 and info.has_tokenizer
    assert (info.task_family, info.sentence_transformers_pooling) == ("feature_extraction", "mean")
    assert fake_hub.full_downloads(".safetensors") == []  # only ranged reads of the header
    assert any(r for m, p, r in fake_hub.requests if p.endswith("model.safetensors") and r)
    assert Path(info.local_dir, "config.json").is_file()  # in the HF cache, like any download


def test_sharded_hub_model(fake_hub, tmp_path: Path, safetensors_writer, model_writer, cli) -> None:
    """In a subprocess: huggingface_hub fetches the index into the cache it read at import time."""
    repo = model_writer(
        tmp_path / "repo", {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "torch_dtype": "bfloat16"}
    )
    safetensors_writer(repo / "model-00001-of-00002.safetensors", {"a": ("BF16", [64, 64])})
    safetensors_writer(repo / "model-00002-of-00002.safetensors", {"b": ("BF16", [64, 32])})
    (repo / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})
    )
    fake_hub.add("mistralai/tiny", repo, COMMIT)
    proc = cli("mistralai/tiny", "--json", env={"HF_HUB_OFFLINE": "0"})
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert (info["parameter_count"], info["dtype"], info["task_family"]) == (64 * 64 + 64 * 32, "bfloat16", "causal_lm")
    assert info["weight_files"] == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert (tmp_path / "hf-cache" / "models--mistralai--tiny").is_dir()
    assert fake_hub.full_downloads(".safetensors") == []


def test_unknown_repo_is_one_line(fake_hub, cli) -> None:
    proc = cli("nobody/nothing", env={"HF_HUB_OFFLINE": "0"})
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: nobody/nothing not found on http://127.0.0.1:")
    assert proc.stderr.count("\n") == 1


def test_gated_repo_without_token_is_blocked_with_token_proceeds(fake_hub, minilm_dir: Path, cli, monkeypatch) -> None:
    fake_hub.add("meta-llama/gated-minilm", minilm_dir, COMMIT, gated=True)
    proc = cli("meta-llama/gated-minilm", "--json", env={"HF_HUB_OFFLINE": "0"})
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["gated"] is True and info["decision"]["rule"] == "gated_no_token"
    # The Hub's own count (all dtypes) stands in for the headers the client may not read.
    assert info["parameter_count"] == 22_713_216 and info["buffer_elements"] == 512
    assert fake_hub.full_downloads("config.json") == []

    proc = cli("meta-llama/gated-minilm", "--json", env={"HF_HUB_OFFLINE": "0", "HF_TOKEN": "hf_test_token"})
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["decision"]["action"] == "proceed" and info["parameter_count_source"] == "safetensors"
    assert "hf_test_token" not in proc.stdout + proc.stderr


def test_stage_and_gate_online(claim_discovery, fake_hub, board: BoardStore, minilm_dir: Path, tmp_path: Path) -> None:
    repo = shutil.copytree(minilm_dir, tmp_path / "repo")
    fake_hub.add(MINILM, repo, COMMIT)
    board.register_models([Registration(model_id=MINILM, source="huggingface")])
    ctx = claim_discovery(MINILM)
    assert DISCOVERY_STAGE.run(ctx).status == "done"
    verdict = DISCOVERY_STAGE.gate(ctx)
    assert verdict.passed, verdict.summary
    # The commit the evidence is pinned to disappears (history rewritten): the gate cannot confirm.
    fake_hub.add(MINILM, repo, "b" * 40)
    moved = DISCOVERY_STAGE.gate(ctx)
    assert not moved.passed and "RevisionNotFoundError" in moved.summary, moved.summary


def test_token_without_access_blocks_the_stage(
    claim_discovery, fake_hub, board: BoardStore, minilm_dir: Path, monkeypatch
) -> None:
    """A token is set but the Hub refuses the files (no access granted): blocked, not retried."""
    fake_hub.add("meta-llama/gated-minilm", minilm_dir, COMMIT, gated=True)
    monkeypatch.setenv("HF_TOKEN", "hf_token_without_access")
    fake_hub.refuse_tokens = True
    board.register_models([Registration(model_id="meta-llama/gated-minilm", source="huggingface")])
    ctx = claim_discovery("meta-llama/gated-minilm")
    outcome = DISCOVERY_STAGE.run(ctx)
    assert outcome.status == "blocked" and outcome.diagnosis["rule"] == "gated_no_token"
    assert "hf_token_without_access" not in outcome.summary + ctx.log.getvalue()


def test_hub_pipeline_tag_decides_what_the_config_cannot(fake_hub, tmp_path: Path, model_writer) -> None:
    """A config without architectures says no head; the Hub's own pipeline tag (not in the card) names it."""
    repo = model_writer(tmp_path / "mixer", {"model_type": "patchtsmixer", "context_length": 32})
    fake_hub.add("ibm/tiny-mixer", repo, COMMIT, pipeline_tag="time-series-forecasting")
    info = discover("ibm/tiny-mixer", "huggingface")
    assert info.task_family == "time_series_forecasting"
    assert info.model_class == "AutoModelForTimeSeriesPrediction"
    assert "pipeline tag is 'time-series-forecasting'" in info.task_family_reason
