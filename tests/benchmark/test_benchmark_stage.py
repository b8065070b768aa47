"""BENCHMARK_STAGE end to end: real generator output, real uv environment, a dtype finding sent back
through the healer, board metrics, gate."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore
from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.stable_envs import python as package_python
from ascendbridge.teamlead.guidance import open_directives, send_back
from bench.support.tiny_adaptations import stage_context as make_context
from benchmark.stage import BENCHMARK_STAGE, board_figures, spec_change
from healing.stage import HEALING_STAGE


@pytest.mark.timeout(900)
@pytest.mark.slow  # fast tier: benchmark, healer and gate on a real model
def test_a_dtype_finding_goes_back_through_the_healer_then_both_dtypes_pass_and_the_gate_too(
    board: BoardStore, board_path: Path, tmp_path: Path
) -> None:
    """A tiny FNetModel: float32 passes; its FFT refuses bfloat16 on CPU, a located finding. The
    stage does not touch the spec: its outcome carries the spec change, which the team lead sends
    back (a directive for the healer, a rollback to healing). The healing stage applies the rule's
    fix (FNetBasicFourierTransform kept in float32), the benchmark runs again, ends done with both
    evidence sets, and its gate passes (or, on a loaded host, is inconclusive: never failed)."""
    model_id = "demo/tiny-fnet"
    ctx = make_context(
        board,
        board_path,
        tmp_path,
        {"device": "cpu", "benchmark_iters": 3, "benchmark_warmup": 1, "benchmark_num_samples": 1},
        name="tiny-fnet",
    )
    before = (ctx.adaptation_dir / "adaptation.json").read_bytes()
    found = BENCHMARK_STAGE.run(ctx)
    assert found.status == "failed" and found.spec_change is not None, (found.summary, ctx.log.getvalue()[-3000:])
    change = found.spec_change
    assert change["rule"] == "dtype_unsupported" and "needs a spec change" in found.summary
    finding = change["finding"]
    assert finding["dtype"] == "bfloat16" and finding["device"] == "cpu"
    assert finding["module_class"] == "FNetBasicFourierTransform" and finding["module"].startswith(
        "encoder.layer.0.fourier"
    )
    assert "fft" in finding["operator"] and "Unsupported dtype BFloat16" in finding["error"]
    assert "ASCENDBRIDGE_DTYPE_FINDING " in ctx.log.getvalue()  # the finding is its own line for people and logs
    assert (ctx.adaptation_dir / "adaptation.json").read_bytes() == before  # the benchmark never edits the spec

    # The team lead's part: the stages before the benchmark are done, the benchmark fails with the change.
    for stage in ("discovery", "adaptation", "healing", "benchmark"):
        task = board.claim_next(owner="test-worker", lease_s=60, stages=[stage])
        assert task is not None and task.model_id == model_id
        if stage == "benchmark":
            board.fail_task(task.id, task.fencing_token, found.diagnosis or {})
        else:
            board.complete_task(task.id, task.fencing_token, {"ok": True})
    send_back(board, model_id, "benchmark", change)
    states = {t.stage: t.status for t in board.list_tasks(model_id=model_id)}
    assert states["healing"] == "pending" and states["benchmark"] == "waiting"
    (directive,) = open_directives(board, model_id)
    assert directive["finding"] == finding and directive["from_stage"] == "benchmark"

    ctx.directives = [directive]  # what the worker gives the healing stage's context
    healed = HEALING_STAGE.run(ctx)
    assert healed.status == "done", (healed.summary, healed.diagnosis)
    assert "keep FNetBasicFourierTransform in float32" in (healed.fix_applied or "")
    fixed = AdaptationSpec.load(ctx.adaptation_dir)  # the package keeps the healer's remedy
    assert fixed.dtype.keep_fp32_modules == ["FNetBasicFourierTransform"]
    assert fixed.applied_fixes[-1].rule == "dtype_unsupported"

    ctx.log, ctx.directives = io.StringIO(), []
    outcome = BENCHMARK_STAGE.run(ctx)
    assert outcome.status == "done" and outcome.spec_change is None, (outcome.summary, ctx.log.getvalue()[-3000:])
    assert [(r["dtype"], r["verdict"]) for r in outcome.result["runs"]] == [("float32", "pass"), ("bfloat16", "pass")]
    assert (ctx.adaptation_dir / "accuracy_run.py").is_file() and package_python(ctx.adaptation_dir).is_file()
    readme = (ctx.adaptation_dir / "README.md").read_text()
    assert "| cpu (" in readme and "check_accuracy_run.py" in readme
    # The figures travel in the outcome; the team lead writes them with the gate's completion.
    proposed = {(f.dtype, name): value for f in outcome.metrics for name, value in f.values.items()}
    assert proposed[("float32", "accuracy_pass")] == 1.0 and proposed[("bfloat16", "median_ms")] > 0
    assert board.list_metrics(model_id) == []  # the stage never writes the board itself
    (kept,) = outcome.result["dtype_findings"]
    assert kept["dtype"] == "bfloat16" and kept["kept"] is True and kept["module_class"] == "FNetBasicFourierTransform"
    assert "remedy applied: keep FNetBasicFourierTransform in float32" in kept["summary"]
    assert "bfloat16 evidence set is kept" in outcome.summary
    assert outcome.result["runs"][1]["keep_fp32_modules"] == ["FNetBasicFourierTransform"]
    assert spec_change(finding, fixed) is None  # the same island is never asked for twice

    gate = BENCHMARK_STAGE.gate(ctx)  # honest: passed, or inconclusive where the host's load leaves a timing open
    assert gate.passed or gate.inconclusive, gate.summary
    assert gate.inconclusive == bool(gate.report["undecided"])
    assert len(gate.report["runs"]) == 3  # two evidence sets and the operator report (docs/operators.md)
    assert gate.report["runs"][2]["metrics_file"] == "op_gaps.json" and gate.report["runs"][2]["consistent"]
    coverage = outcome.result["op_coverage"]["releases"]["2.7.1.post2"]  # recorded by the float32 run itself
    assert coverage["ops"] > 10 and coverage["gaps"] == [] and "recording the model" not in ctx.log.getvalue()

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
    values, units = board_figures(
        {"median_ms": 2.0, "min_ms": 1.5, "p90_ms": 3, "peak_memory_bytes": None, "verdict": "fail"}
    )
    assert values == {"median_ms": 2.0, "min_ms": 1.5, "p90_ms": 3.0, "accuracy_pass": 0.0}
    assert units["median_ms"] == "ms"
