"""ADAPTATION_STAGE on real board records produced by real discovery of the bundled demo models."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest

from adaptation.stage import ADAPTATION_STAGE
from ascendbridge.board import BoardStore
from ascendbridge.config import REPO_ROOT
from ascendbridge.discovery.discover import discover
from ascendbridge.discovery.model_info import ModelInfo
from ascendbridge.package.spec import AdaptationSpec, AppliedFix
from ascendbridge.stage_api import Stage, StageContext
from bench.support.local_model import put_discovered, stage_context
from tests.adaptation.helpers import REMOTE_CODE, UNKNOWN_FAMILY

pytestmark = pytest.mark.slow  # renders and uv-locks real packages

DEMO = REPO_ROOT / "demo_models"


def discovered(board: BoardStore, info: ModelInfo) -> StageContext:
    """The adaptation task's context once discovery has put `info` on the board."""
    put_discovered(board, info)
    return stage_context(board, info.model_id, "adaptation")


def demo_context(board: BoardStore, name: str) -> StageContext:
    model_id = f"demo/{name}"
    return discovered(board, discover(model_id, "local", str(DEMO / name)))


def test_stage_is_registered_under_its_entry_point() -> None:
    found = {ep.name: ep for ep in entry_points(group="ascendbridge.stages")}
    stage = found["adaptation"].load()
    assert stage is ADAPTATION_STAGE and isinstance(stage, Stage) and stage.name == "adaptation"


def test_run_renders_and_locks_then_the_gate_passes(board: BoardStore) -> None:
    ctx = demo_context(board, "tiny-gpt2")
    outcome = ADAPTATION_STAGE.run(ctx)
    assert outcome.status == "done", outcome
    assert outcome.result["task_family"] == "causal_lm" and outcome.result["model_class"] == "GPT2LMHeadModel"
    assert "uv.lock" in outcome.result["files_changed"] and outcome.result["lock_s"] > 0
    spec = AdaptationSpec.load(ctx.adaptation_dir)
    assert spec.model.path == str(DEMO / "tiny-gpt2") and spec.model.source == "local"
    assert "rendering" in ctx.log.getvalue()
    verdict = ADAPTATION_STAGE.gate(ctx)
    assert verdict.passed, verdict.summary
    assert {c["name"] for c in verdict.report["checks"]} >= {"files", "spec", "runtime", "pyproject", "lock"}

    again = ADAPTATION_STAGE.run(ctx)  # unchanged record: nothing rewritten, no new lock
    assert again.status == "done" and again.result["files_changed"] == [] and again.result["lock_s"] is None


def test_rerun_keeps_the_healers_fixes(board: BoardStore) -> None:
    ctx = demo_context(board, "tiny-bert")
    assert ADAPTATION_STAGE.run(ctx).status == "done"
    spec = AdaptationSpec.load(ctx.adaptation_dir)
    spec.inputs.seq_len = 8
    spec.applied_fixes.append(AppliedFix(rule="oom", description="shorter sequence", attempt=1))
    spec.save(ctx.adaptation_dir)
    outcome = ADAPTATION_STAGE.run(ctx)
    assert outcome.status == "done" and "README.md" in outcome.result["files_changed"]
    kept = AdaptationSpec.load(ctx.adaptation_dir)
    assert kept.inputs.seq_len == 8 and kept.applied_fixes[0].rule == "oom"


def test_unknown_family_fails_with_a_diagnosis_and_writes_nothing(board: BoardStore, tmp_path: Path) -> None:
    ctx = discovered(board, UNKNOWN_FAMILY)
    outcome = ADAPTATION_STAGE.run(ctx)
    assert outcome.status == "failed"
    assert outcome.diagnosis["rule"] == "unknown_task_family" and "OddForSomething" in outcome.summary
    assert not ctx.adaptation_dir.exists()


def test_remote_code_without_permission_is_blocked(board: BoardStore) -> None:
    outcome = ADAPTATION_STAGE.run(discovered(board, REMOTE_CODE))
    assert outcome.status == "blocked" and outcome.diagnosis["rule"] == "remote_code_not_allowed"


@pytest.mark.slow  # fast tier: a real adaptation and its gate
def test_gate_fails_on_a_tampered_package(board: BoardStore) -> None:
    ctx = demo_context(board, "tiny-llama")
    assert ADAPTATION_STAGE.run(ctx).status == "done"
    pyproject = ctx.adaptation_dir / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"torch-npu==', '"torch-npu-fake=='))
    verdict = ADAPTATION_STAGE.gate(ctx)
    assert not verdict.passed
    assert "pyproject" in verdict.summary and "lock" in verdict.summary


def test_gate_fails_when_nothing_was_rendered(board: BoardStore) -> None:
    ctx = demo_context(board, "tiny-vit")
    verdict = ADAPTATION_STAGE.gate(ctx)
    assert not verdict.passed and "unknown adaptation" in verdict.summary
