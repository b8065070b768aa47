"""A timed stage (benchmark, optimization, training) on a host forced small (ASCENDBRIDGE_HOST_MEMORY_BYTES) refuses before it renders,
syncs or loads anything, with the plan's figures in its one line: a refusal, never retried."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore
from ascendbridge.board.records import TrainingJob
from ascendbridge.memory_plan import GIB, REFUSED_RULE
from ascendbridge.refusals import is_refusal
from ascendbridge.stage_api import StageOutcome
from bench.support.tiny_adaptations import stage_context
from benchmark.stage import BENCHMARK_STAGE
from optimization.stage import OPTIMIZATION_STAGE
from tests.training.train_support import CORPUS, training_context, training_package
from training.stage import TRAINING_STAGE, memory_remedy

SMALL_HOST = 256 * 1024**2
PARAMETERS = 1_500_000_000  # discovery's count of a 1.5 B model (the stage reads it from the board's row)


def refused_with_figures(outcome: StageOutcome, log: str) -> None:
    diagnosis = outcome.diagnosis
    assert outcome.status == "failed" and diagnosis["rule"] == REFUSED_RULE, (outcome, log)
    assert is_refusal(diagnosis) and diagnosis["remedy"]
    plan = diagnosis["memory_plan"]
    assert plan["plan"] == "refused" and plan["parameters"] <= PARAMETERS
    needs, budget = plan["needs_bytes"]["host"], plan["budget_bytes"]["host"]
    assert budget == int(0.8 * SMALL_HOST) < needs
    figures = f"needs {needs / GIB:.1f} GiB of {budget / GIB:.1f} GiB available"
    assert figures in outcome.summary and "\n" not in outcome.summary
    assert f"memory plan: refused ({figures})" in log


@pytest.fixture
def small_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCENDBRIDGE_HOST_MEMORY_BYTES", str(SMALL_HOST))


@pytest.mark.usefixtures("small_host")
def test_the_benchmark_refuses_on_a_small_host_before_it_renders_anything(
    board: BoardStore, board_path: Path, tmp_path: Path
) -> None:
    ctx = stage_context(board, board_path, tmp_path, {})
    ctx.model = ctx.model.model_copy(update={"parameter_count": PARAMETERS, "dtype": "bfloat16"})
    outcome = BENCHMARK_STAGE.run(ctx)
    log = ctx.log.getvalue() if isinstance(ctx.log, io.StringIO) else ""
    refused_with_figures(outcome, log)
    assert not (ctx.adaptation_dir / "accuracy_run.py").exists() and "syncing" not in log


@pytest.mark.usefixtures("small_host")
def test_the_optimization_refuses_on_a_small_host_before_it_syncs_anything(
    board: BoardStore, board_path: Path, tmp_path: Path
) -> None:
    ctx = stage_context(board, board_path, tmp_path, {})
    ctx.task = board.list_tasks(stage="optimization", model_id=ctx.model.model_id)[0]
    ctx.model = ctx.model.model_copy(update={"parameter_count": PARAMETERS, "dtype": "bfloat16"})
    outcome = OPTIMIZATION_STAGE.run(ctx)
    log = ctx.log.getvalue() if isinstance(ctx.log, io.StringIO) else ""
    refused_with_figures(outcome, log)
    assert "optimization.real_weights=false" in outcome.diagnosis["remedy"] and "syncing" not in log


@pytest.mark.usefixtures("small_host")
def test_training_refuses_on_a_small_host_before_it_prepares_the_job(board: BoardStore) -> None:
    record, directory = training_package(board, "demo/llama", TrainingJob(data=str(CORPUS), method="lora", steps=4))
    ctx = training_context(
        board, record.model_copy(update={"parameter_count": PARAMETERS, "dtype": "float32"}), directory
    )
    outcome = TRAINING_STAGE.run(ctx)
    refused_with_figures(outcome, ctx.log.getvalue() if isinstance(ctx.log, io.StringIO) else "")
    assert "3 lora training states" in outcome.summary
    assert "LoRA job instead" not in outcome.diagnosis["remedy"]  # it is one: a full job is offered LoRA
    assert "a LoRA job instead of a full one" in memory_remedy("full")
    assert not (directory / "train").exists()
