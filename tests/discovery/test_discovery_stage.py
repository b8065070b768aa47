"""DISCOVERY_STAGE on a real board: run proposes, the gate re-derives and can fail."""

from __future__ import annotations

import json
import shutil
from importlib.metadata import entry_points
from pathlib import Path

from ascendbridge.board import BoardStore
from ascendbridge.board.records import Registration
from ascendbridge.demo_models import list_demo_models
from ascendbridge.stage_api import Stage
from discovery.evidence import evidence_path
from discovery.stage import DISCOVERY_STAGE

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _register(board: BoardStore, model_id: str, path: Path, source: str = "local", **kw) -> None:
    board.register_models([Registration(model_id=model_id, source=source, path=str(path), **kw)])


def test_entry_point_names_the_stage() -> None:
    (ep,) = [e for e in entry_points(group="ascendbridge.stages") if e.name == "discovery"]
    stage = ep.load()
    assert stage is DISCOVERY_STAGE and isinstance(stage, Stage) and stage.name == "discovery"


def test_minilm_run_store_and_gate(claim_discovery, board: BoardStore, minilm_dir: Path) -> None:
    _register(board, "sentence-transformers/all-MiniLM-L6-v2", minilm_dir)
    ctx = claim_discovery("sentence-transformers/all-MiniLM-L6-v2")
    outcome = DISCOVERY_STAGE.run(ctx)
    assert outcome.status == "done", outcome.summary
    assert outcome.model_fields == {
        "architecture": "BertModel",
        "model_type": "bert",
        "task_family": "feature_extraction",
        "parameter_count": 22_713_216,
        "dtype": "float32",
        "size_bytes": 90_868_376,
        "license": "apache-2.0",
        "gated": None,
    }
    assert outcome.model_metadata["decision"]["action"] == "proceed"
    assert "parameters: 22,713,216 (safetensors)" in ctx.log.getvalue()
    record = board.update_model_metadata(ctx.model.model_id, outcome.model_fields, outcome.model_metadata)
    assert record.parameter_count == 22_713_216 and record.metadata["sentence_transformers_pooling"] == "mean"

    verdict = DISCOVERY_STAGE.gate(ctx)
    assert verdict.passed, verdict.summary
    assert {c["check"] for c in verdict.report["checks"]} >= {"parameter_count", "config_matches", "size_bytes"}

    # A claim that disagrees with the headers fails the gate.
    path = evidence_path(ctx.model.adaptation_name, ctx.task.fencing_token)
    claim = json.loads(path.read_text())
    claim["parameter_count"] += 1
    path.write_text(json.dumps(claim))
    failed = DISCOVERY_STAGE.gate(ctx)
    assert not failed.passed and "parameter_count" in failed.summary


def test_gate_fails_when_the_files_change_after_the_run(claim_discovery, board: BoardStore, tmp_path: Path) -> None:
    demo = next(d for d in list_demo_models() if d.name == "tiny-t5")
    copy = shutil.copytree(demo.path, tmp_path / "t5")
    _register(board, demo.model_id, copy)
    ctx = claim_discovery(demo.model_id)
    assert DISCOVERY_STAGE.run(ctx).status == "done"
    assert DISCOVERY_STAGE.gate(ctx).passed
    config = json.loads((copy / "config.json").read_text())
    config["num_layers"] = 24
    (copy / "config.json").write_text(json.dumps(config))
    verdict = DISCOVERY_STAGE.gate(ctx)
    assert not verdict.passed and "config_matches" in verdict.summary


def test_gate_without_evidence_fails(claim_discovery, board: BoardStore) -> None:
    demo = list_demo_models()[0]
    _register(board, demo.model_id, demo.path)
    verdict = DISCOVERY_STAGE.gate(claim_discovery(demo.model_id))
    assert not verdict.passed and "no readable discovery evidence" in verdict.summary


def test_hf_cache_source_through_the_stage(
    claim_discovery, board: BoardStore, minilm_dir: Path, tmp_path: Path, hf_cache_builder
) -> None:
    cache = tmp_path / "hub"
    hf_cache_builder(cache, "sentence-transformers/all-MiniLM-L6-v2", minilm_dir, COMMIT)
    _register(board, "sentence-transformers/all-MiniLM-L6-v2", cache, source="hf-cache")
    ctx = claim_discovery("sentence-transformers/all-MiniLM-L6-v2")
    outcome = DISCOVERY_STAGE.run(ctx)
    assert outcome.status == "done" and outcome.model_metadata["resolved_revision"] == COMMIT
    assert DISCOVERY_STAGE.gate(ctx).passed


def test_too_large_model_is_skipped(
    claim_discovery, board: BoardStore, tmp_path: Path, model_writer, llama_70b_config, monkeypatch
) -> None:
    monkeypatch.setenv("ASCENDBRIDGE_DEVICE_MEMORY_GB", "64")
    _register(board, "meta-llama/Llama-3.1-70B", model_writer(tmp_path / "m", llama_70b_config))
    ctx = claim_discovery("meta-llama/Llama-3.1-70B")
    outcome = DISCOVERY_STAGE.run(ctx)
    assert outcome.status == "skipped" and outcome.diagnosis["rule"] == "too_large"
    assert outcome.model_fields["parameter_count"] > 69e9


def test_remote_code_blocked_then_allowed(claim_discovery, board: BoardStore, tmp_path: Path, model_writer) -> None:
    config = {
        "architectures": ["CustomForCausalLM"],
        "model_type": "custom",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "vocab_size": 128,
        "auto_map": {"AutoModelForCausalLM": "modeling_c.CustomForCausalLM"},
    }
    path = model_writer(tmp_path / "m", config, {"modeling_c.py": "\n"})
    _register(board, "someone/custom", path)
    ctx = claim_discovery("someone/custom")
    outcome = DISCOVERY_STAGE.run(ctx)
    assert outcome.status == "blocked" and outcome.diagnosis["rule"] == "remote_code_not_allowed"
    board.fail_task(ctx.task.id, ctx.task.fencing_token, outcome.diagnosis, status="blocked")
    board.set_allow_remote_code("someone/custom", True)
    board.retry("someone/custom")
    again = claim_discovery("someone/custom")
    assert DISCOVERY_STAGE.run(again).status == "done"
    assert DISCOVERY_STAGE.gate(again).passed


def test_corrupt_config_fails_with_a_rule(claim_discovery, board: BoardStore, tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{oops")
    _register(board, "x/broken", tmp_path / "m")
    ctx = claim_discovery("x/broken")
    outcome = DISCOVERY_STAGE.run(ctx)
    assert outcome.status == "failed" and outcome.diagnosis["rule"] == "corrupt_config"
    assert "\n" not in outcome.summary and outcome.model_metadata is None
    assert not evidence_path(ctx.model.adaptation_name, ctx.task.fencing_token).exists()
