"""BUSINESS_BENCHMARK_STAGE end to end: generator output, a real uv env, board metrics, the gate."""

from __future__ import annotations

import io
import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore
from ascendbridge.board.queries import BoardQueries
from ascendbridge.envmode import ENV_MODE_VAR, SYSTEM_PYTHON_VAR
from ascendbridge.package.generator import generate
from ascendbridge.package.spec import InputRecipe
from ascendbridge.package.stack import MARKER, system_marker
from ascendbridge.stage_api import StageContext
from ascendbridge.stage_registry import check_loadable, stage_refs
from ascendbridge.stages import STAGES
from business_benchmark.stage import BUSINESS_BENCHMARK_STAGE
from tests.business_benchmark.business_support import demo_dir
from tests.support.local_model import register_local


def make_context(board: BoardStore, board_path: Path, settings: dict) -> StageContext:
    model_dir = demo_dir("tiny-bert-classifier")
    record, task, directory, spec = register_local(
        board,
        "demo/tiny-bert-classifier",
        model_dir,
        "business_benchmark",
        "sequence_classification",
        "BertForSequenceClassification",
        "bert",
        inputs=InputRecipe(batch_size=1, seq_len=16),
    )
    assert generate(spec, directory).ok
    return StageContext(
        model=record, task=task, adaptation_dir=directory, board_path=board_path, log=io.StringIO(), settings=settings
    )


def test_stage_is_registered_and_runnable() -> None:
    ref = stage_refs().get("business_benchmark")
    assert ref is not None and ref.source == "entry-point" and check_loadable(ref, "business_benchmark") is None


@pytest.mark.timeout(900)
@pytest.mark.slow  # fast tier: a real business run
def test_stage_runs_passes_its_gate_and_its_figures_reach_the_board_on_completion(
    board: BoardStore, board_path: Path
) -> None:
    ctx = make_context(board, board_path, {"device": "cpu", "business_max_items": 4, "business_threads": 1})
    outcome = BUSINESS_BENCHMARK_STAGE.run(ctx)
    assert outcome.status == "done", (outcome.summary, outcome.diagnosis, ctx.log.getvalue()[-3000:])
    assert outcome.result["weights"] == "config-initialised" and "agreement only" in outcome.summary
    assert (ctx.adaptation_dir / "business_run.py").is_file()
    assert (ctx.adaptation_dir / "business_data" / "ab-sentiment-en.jsonl").is_file()
    # The figures travel in the outcome; nothing reaches the board before the gate passed.
    assert board.list_metrics("demo/tiny-bert-classifier") == []
    gate = BUSINESS_BENCHMARK_STAGE.gate(ctx)
    assert gate.passed, gate.summary
    for stage in STAGES[: STAGES.index("business_benchmark")]:  # make the task claimable
        board.skip("demo/tiny-bert-classifier", stage)
    task = board.claim_task(ctx.task.id, "test", 60.0)  # the team lead's fenced completion
    board.complete_task(
        task.id, task.fencing_token, {"summary": outcome.summary}, figures=[asdict(f) for f in outcome.metrics]
    )
    recorded = {m.name: m for m in board.list_metrics("demo/tiny-bert-classifier", "business_benchmark")}
    assert recorded["business_pass"].value == 1.0 and recorded["real_weights"].value == 0.0
    assert recorded["ab-sentiment-en.label_agreement"].dtype == "bfloat16"  # float32 spec target -> bf16 run
    queries = BoardQueries(board_path)
    shown = queries.business_results()["demo/tiny-bert-classifier"]
    queries.close()
    assert shown["verdict"] == "pass" and "ab-sentiment-en.label_agreement" in shown["metrics"]


def test_bad_settings_fail_cleanly(board: BoardStore, board_path: Path) -> None:
    ctx = make_context(board, board_path, {"business_bounds": "label_agreement=0.1"})
    outcome = BUSINESS_BENCHMARK_STAGE.run(ctx)
    assert outcome.status == "failed" and "loosen" in outcome.summary and outcome.diagnosis["rule"] == "bad_setting"
    assert board.list_metrics("demo/tiny-bert-classifier") == []
    assert not (ctx.adaptation_dir / "business_run.py").exists()


def test_a_system_mode_model_is_synced_in_its_own_mode(
    board: BoardStore, board_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The board says `system` for this model (the run's default is locked): the stage syncs the
    system way (here its interpreter is gone: one error line), and never runs `uv sync --locked`,
    which would delete the model's system venv."""
    monkeypatch.setenv(ENV_MODE_VAR, "locked")  # restored after the test: the stage sets the model's mode
    monkeypatch.setenv(SYSTEM_PYTHON_VAR, "")
    ctx = make_context(board, board_path, {"device": "cpu"})
    gone = tmp_path / "vendor" / "bin" / "python"
    ctx = replace(ctx, model=board.set_env_mode(ctx.model.model_id, "system", str(gone)))
    venv = ctx.adaptation_dir / ".venv"
    venv.mkdir()
    (venv / MARKER).write_text(json.dumps({"mode": "system", "base": str(gone)}))
    outcome = BUSINESS_BENCHMARK_STAGE.run(ctx)
    assert outcome.status == "failed" and outcome.diagnosis["rule"] == "sync_failed", outcome.summary
    assert f"system interpreter {gone} does not exist" in outcome.diagnosis["log_tail"]
    assert system_marker(ctx.adaptation_dir) is not None  # the system venv is still there
