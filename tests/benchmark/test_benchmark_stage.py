"""BENCHMARK_STAGE end to end: real generator output, real uv environment, board metrics, gate."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from adaptation.generator import generate
from adaptation.spec import AdaptationSpec, InputRecipe, ModelSource
from ascendbridge.board import BoardStore
from ascendbridge.board.records import Registration
from ascendbridge.config import adaptations_dir
from ascendbridge.stage_api import StageContext
from benchmark.stage import BENCHMARK_STAGE, board_figures
from tests.benchmark.bench_support import TINY_MODELS


def make_context(board: BoardStore, board_path: Path, tmp_path: Path, settings: dict) -> StageContext:
    model_dir = tmp_path / "models" / "tiny-bert"
    model_dir.mkdir(parents=True)
    (model_dir / "config.json").write_text(json.dumps(TINY_MODELS["tiny-bert"]["config"]))
    (record, _), = board.register_models([Registration(model_id="demo/tiny-bert", source="local", path=str(model_dir))])
    task = board.list_tasks(stage="benchmark", model_id=record.model_id)[0]
    directory = adaptations_dir() / record.adaptation_name
    spec = AdaptationSpec(
        name=record.adaptation_name,
        model=ModelSource(model_id=record.model_id, source="local", path=str(model_dir), has_weights=False),
        task_family="feature_extraction", model_class="BertModel", model_type="bert",
        inputs=InputRecipe(batch_size=2, seq_len=16),
    )
    assert generate(spec, directory).ok
    return StageContext(model=record, task=task, adaptation_dir=directory, board_path=board_path,
                        log=io.StringIO(), settings=settings)


@pytest.mark.timeout(900)
def test_stage_runs_both_dtypes_records_metrics_and_passes_its_gate(board: BoardStore, board_path: Path,
                                                                     tmp_path: Path) -> None:
    ctx = make_context(board, board_path, tmp_path, {"device": "cpu", "benchmark_iters": 3, "benchmark_warmup": 1,
                                                     "benchmark_num_samples": 1})
    outcome = BENCHMARK_STAGE.run(ctx)
    assert outcome.status == "done", (outcome.summary, outcome.diagnosis, ctx.log.getvalue()[-3000:])
    assert [r["dtype"] for r in outcome.result["runs"]] == ["float32", "bfloat16"]
    assert (ctx.adaptation_dir / "accuracy_run.py").is_file() and (ctx.adaptation_dir / ".venv").is_dir()
    readme = (ctx.adaptation_dir / "README.md").read_text()
    assert "| cpu (" in readme and "check_accuracy_run.py" in readme
    # The figures travel in the outcome; the team lead writes them with the gate's completion.
    proposed = {(f.dtype, name): value for f in outcome.metrics for name, value in f.values.items()}
    assert proposed[("float32", "accuracy_pass")] == 1.0 and proposed[("bfloat16", "median_ms")] > 0
    assert board.list_metrics("demo/tiny-bert") == []  # the stage never writes the board itself
    gate = BENCHMARK_STAGE.gate(ctx)
    assert gate.passed, gate.summary
    assert len(gate.report["runs"]) == 2

    # The gate is independent: a flattering edit of the recorded latency fails it.
    metrics_path = ctx.adaptation_dir / "benchmark_metrics_cpu_bfloat16_dry_run_synthetic.json"
    metrics = json.loads(metrics_path.read_text())
    metrics["timing"]["p90_ms"] = metrics["timing"]["median_ms"] = metrics["timing"]["min_ms"]
    metrics_path.write_text(json.dumps(metrics))
    gate = BENCHMARK_STAGE.gate(ctx)
    assert not gate.passed and "median_ms does not match its samples" in gate.summary


def test_bad_settings_fail_cleanly(board: BoardStore, board_path: Path, tmp_path: Path) -> None:
    ctx = make_context(board, board_path, tmp_path, {"benchmark_dtypes": "float8"})
    outcome = BENCHMARK_STAGE.run(ctx)
    assert outcome.status == "failed" and "float8" in outcome.summary
    assert board.list_metrics("demo/tiny-bert") == []


def test_board_figures_only_numbers() -> None:
    values, units = board_figures({"median_ms": 2.0, "p90_ms": 3, "peak_memory_bytes": None, "verdict": "fail"})
    assert values == {"median_ms": 2.0, "p90_ms": 3.0, "accuracy_pass": 0.0}
    assert units["median_ms"] == "ms"
