"""BENCHMARK_STAGE end to end: real generator output, real uv environment, a dtype finding healed, board metrics, gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adaptation.healing.failure import Failure
from adaptation.spec import AdaptationSpec
from ascendbridge.board import BoardStore
from benchmark.stage import BENCHMARK_STAGE, board_figures, keep_module_fp32
from tests.benchmark.bench_support import stage_context as make_context


@pytest.mark.timeout(900)
def test_stage_runs_both_dtypes_heals_a_dtype_finding_records_metrics_and_passes_its_gate(
        board: BoardStore, board_path: Path, tmp_path: Path) -> None:
    """A tiny FNetModel: float32 passes; its FFT refuses bfloat16 on CPU, a located finding; the
    healer's rule keeps FNetBasicFourierTransform in float32, the bfloat16 rerun passes, the stage
    ends done with both evidence sets, and its gate passes."""
    ctx = make_context(board, board_path, tmp_path, {"device": "cpu", "benchmark_iters": 3, "benchmark_warmup": 1,
                                                     "benchmark_num_samples": 1}, name="tiny-fnet")
    outcome = BENCHMARK_STAGE.run(ctx)
    assert outcome.status == "done", (outcome.summary, outcome.diagnosis, ctx.log.getvalue()[-3000:])
    assert [(r["dtype"], r["verdict"]) for r in outcome.result["runs"]] == [("float32", "pass"), ("bfloat16", "pass")]
    assert (ctx.adaptation_dir / "accuracy_run.py").is_file() and (ctx.adaptation_dir / ".venv").is_dir()
    readme = (ctx.adaptation_dir / "README.md").read_text()
    assert "| cpu (" in readme and "check_accuracy_run.py" in readme
    # The figures travel in the outcome; the team lead writes them with the gate's completion.
    proposed = {(f.dtype, name): value for f in outcome.metrics for name, value in f.values.items()}
    assert proposed[("float32", "accuracy_pass")] == 1.0 and proposed[("bfloat16", "median_ms")] > 0
    assert board.list_metrics("demo/tiny-fnet") == []  # the stage never writes the board itself

    finding, = outcome.result["dtype_findings"]
    assert finding["dtype"] == "bfloat16" and finding["device"] == "cpu" and finding["kept"] is True
    assert finding["module_class"] == "FNetBasicFourierTransform" and finding["module"].startswith("encoder.layer.0.fourier")
    assert "fft" in finding["operator"] and "Unsupported dtype BFloat16" in finding["error"]
    assert "remedy applied: keep FNetBasicFourierTransform in float32" in finding["summary"]
    assert "bfloat16 evidence set is kept" in outcome.summary
    assert "ASCENDBRIDGE_DTYPE_FINDING " in ctx.log.getvalue()  # the finding is its own line for people and logs
    assert outcome.result["runs"][1]["keep_fp32_modules"] == ["FNetBasicFourierTransform"]
    fixed = AdaptationSpec.load(ctx.adaptation_dir)  # the package keeps the remedy
    assert fixed.dtype.keep_fp32_modules == ["FNetBasicFourierTransform"]
    assert fixed.applied_fixes[-1].rule == "dtype_unsupported"
    failure = Failure(phase="benchmark", exit_code=1, timed_out=False, output="", result={"finding": finding})
    assert keep_module_fp32(fixed, failure) is None  # the rule never proposes the same island twice

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
    assert outcome.status == "failed" and "float8" in outcome.summary and outcome.diagnosis["rule"] == "bad_setting"
    assert board.list_metrics("demo/tiny-bert") == []


def test_board_figures_only_numbers() -> None:
    values, units = board_figures({"median_ms": 2.0, "p90_ms": 3, "peak_memory_bytes": None, "verdict": "fail"})
    assert values == {"median_ms": 2.0, "p90_ms": 3.0, "accuracy_pass": 0.0}
    assert units["median_ms"] == "ms"
