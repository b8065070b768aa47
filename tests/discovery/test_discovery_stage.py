"""DISCOVERY_STAGE on a real board: run proposes, the gate re-derives and can fail."""

from __future__ import annotations

import io
import json
import shutil
from importlib.metadata import entry_points
from pathlib import Path

from ascendbridge.board import BoardStore
from ascendbridge.board.records import Registration
from ascendbridge.demo_models import list_demo_models
from ascendbridge.stage_api import Stage, StageContext
from discovery.evidence import evidence_path
from discovery.stage import DISCOVERY_STAGE

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _context(board: BoardStore, model_id: str, tmp_path: Path) -> StageContext:
    task = board.claim_next("test-worker", lease_s=60, stages=["discovery"])
    assert task is not None and task.model_id == model_id
    return StageContext(
        model=board.get_model(model_id),
        task=task,
        adaptation_dir=tmp_path / "adaptations" / "x",
        board_path=board.path,
        log=io.StringIO(),
    )


def _register(board: BoardStore, model_id: str, path: Path, source: str = "local", **kw) -> None:
    board.register_models([Registration(model_id=model_id, source=source, path=str(path), **kw)])


def test_entry_point_names_the_stage() -> None:
    (ep,) = [e for e in entry_points(group="ascendbridge.stages") if e.name == "discovery"]
    stage = ep.load()
    assert stage is DISCOVERY_STAGE and isinstance(stage, Stage) and stage.name == "discovery"


def test_minilm_run_store_and_gate(board: BoardStore, minilm_dir: Path, tmp_path: Path) -> None:
    _register(board, "sentence-transformers/all-MiniLM-L6-v2", minilm_dir)
    ctx = _context(board, "sentence-transformers/all-MiniLM-L6-v2", tmp_path)
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


def test_gate_fails_when_the_files_change_after_the_run(board: BoardStore, tmp_path: Path) -> None:
    demo = next(d for d in list_demo_models() if d.name == "tiny-t5")
    copy = shutil.copytree(demo.path, tmp_path / "t5")
    _register(board, demo.model_id, copy)
    ctx = _context(board, demo.model_id, tmp_path)
    assert DISCOVERY_STAGE.run(ctx).status == "done"
    assert DISCOVERY_STAGE.gate(ctx).passed
    config = json.loads((copy / "config.json").read_text())
    config["num_layers"] = 24
    (copy / "config.json").write_text(json.dumps(config))
    verdict = DISCOVERY_STAGE.gate(ctx)
    assert not verdict.passed and "config_matches" in verdict.summary


def test_gate_without_evidence_fails(board: BoardStore, tmp_path: Path) -> None:
    demo = list_demo_models()[0]
    _register(board, demo.model_id, demo.path)
    verdict = DISCOVERY_STAGE.gate(_context(board, demo.model_id, tmp_path))
    assert not verdict.passed and "no readable discovery evidence" in verdict.summary


def test_hf_cache_source_through_the_stage(
    board: BoardStore, minilm_dir: Path, tmp_path: Path, hf_cache_builder
) -> None:
    cache = tmp_path / "hub"
    hf_cache_builder(cache, "sentence-transformers/all-MiniLM-L6-v2", minilm_dir, COMMIT)
    _register(board, "sentence-transformers/all-MiniLM-L6-v2", cache, source="hf-cache")
    ctx = _context(board, "sentence-transformers/all-MiniLM-L6-v2", tmp_path)
    outcome = DISCOVERY_STAGE.run(ctx)
    assert outcome.status == "done" and outcome.model_metadata["resolved_revision"] == COMMIT
    assert DISCOVERY_STAGE.gate(ctx).passed


def test_too_large_model_is_skipped(
    board: BoardStore, tmp_path: Path, model_writer, llama_70b_config, monkeypatch
) -> None:
    monkeypatch.setenv("ASCENDBRIDGE_DEVICE_MEMORY_GB", "64")
    _register(board, "meta-llama/Llama-3.1-70B", model_writer(tmp_path / "m", llama_70b_config))
    ctx = _context(board, "meta-llama/Llama-3.1-70B", tmp_path)
    outcome = DISCOVERY_STAGE.run(ctx)
    assert outcome.status == "skipped" and outcome.diagnosis["rule"] == "too_large"
    assert outcome.model_fields["parameter_count"] > 69e9


def test_remote_code_blocked_then_allowed(board: BoardStore, tmp_path: Path, model_writer) -> None:
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
    ctx = _context(board, "someone/custom", tmp_path)
    outcome = DISCOVERY_STAGE.run(ctx)
    assert outcome.status == "blocked" and outcome.diagnosis["rule"] == "remote_code_not_allowed"
    board.fail_task(ctx.task.id, ctx.task.fencing_token, outcome.diagnosis, status="blocked")
    board.set_allow_remote_code("someone/custom", True)
    board.retry("someone/custom")
    again = _context(board, "someone/custom", tmp_path)
    assert DISCOVERY_STAGE.run(again).status == "done"
    assert DISCOVERY_STAGE.gate(again).passed


def test_corrupt_config_fails_with_a_rule(board: BoardStore, tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{oops")
    _register(board, "x/broken", tmp_path / "m")
    ctx = _context(board, "x/broken", tmp_path)
    outcome = DISCOVERY_STAGE.run(ctx)
    assert outcome.status == "failed" and outcome.diagnosis["rule"] == "corrupt_config"
    assert "\n" not in outcome.summary and outcome.model_metadata is None
    assert not evidence_path(ctx.model.adaptation_name, ctx.task.fencing_token).exists()
