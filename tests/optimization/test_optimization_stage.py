"""OPTIMIZATION_STAGE end to end: real generator output, real uv environment, board metrics, gates."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore
from ascendbridge.package.generator import generate
from ascendbridge.package.spec import InputRecipe, WorkloadSpec
from ascendbridge.refusals import is_refusal
from ascendbridge.stage_api import StageContext
from bench.support.local_model import local_context, register_local
from optimization.stage import OPTIMIZATION_STAGE, OptimizationSettings
from tests.optimization.opt_support import demo_config

KNOWN_COST = Path(__file__).resolve().parent / "inner" / "known_cost_passes.py"


def make_context(board: BoardStore, board_path: Path, tmp_path: Path, settings: dict) -> StageContext:
    model_dir = tmp_path / "models" / "tiny-llama"
    model_dir.mkdir(parents=True)
    (model_dir / "config.json").write_text(json.dumps(demo_config("tiny-llama")))
    record, task, directory, spec = register_local(
        board,
        "demo/tiny-llama",
        model_dir,
        "optimization",
        "causal_lm",
        "LlamaForCausalLM",
        "llama",
        inputs=InputRecipe(batch_size=2, seq_len=32),
        workload=WorkloadSpec(name="forward"),  # the test-only passes act on one forward's outputs
    )
    assert generate(spec, directory).ok
    return local_context(record, task, directory, board_path, **settings)


@pytest.mark.timeout(1200)
@pytest.mark.slow  # fast tier: a real optimizer search
def test_stage_searches_runs_perf_records_and_passes_its_gates(
    board: BoardStore, board_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # cached outputs (a test-only pass of known, large gain) make the confirmed outcome and the
    # perf gate's own re-measurement certain; int8 is measured for real beside it
    monkeypatch.setenv("AB_RUNTIME_EXTRA_PASSES", str(KNOWN_COST))
    ctx = make_context(
        board,
        board_path,
        tmp_path,
        {
            "device": "cpu",
            "optimization_iters": 2,
            "optimization_passes": "cpu_int8_dynamic,test_cached_outputs",
            "optimization_num_samples": 1,
        },
    )
    outcome = OPTIMIZATION_STAGE.run(ctx)
    assert outcome.status == "done", (outcome.summary, outcome.diagnosis, ctx.log.getvalue()[-3000:])
    directory = ctx.adaptation_dir
    notes = json.loads((directory / "optimization_notes.json").read_text())
    assert (directory / "accuracy_run_perf.py").is_file() and notes["perf_run"]["metrics"].startswith("perf_metrics_")
    assert outcome.result["chosen"] == notes["chosen"] and notes["runtime_only"] is True
    assert "test_cached_outputs" in notes["chosen"] and notes["final"]["outcome"] == "gain"
    assert notes["confirmation"]["measured"] and notes["final"]["speedup"] == notes["confirmation"]["paired"]["speedup"]
    # the confirmation's fresh process wrote the perf evidence from its own pairs (one build, one figure)
    assert notes["perf_run"]["process"] == "confirmation"
    assert notes["perf_run"]["speedup"] == pytest.approx(notes["confirmation"]["paired"]["speedup"])
    assert "confirmed x" in outcome.summary and "the search's own figure was x" in outcome.summary
    proposed = outcome.metrics[0].values  # written by complete_task only after the gate passes
    assert proposed["accuracy_pass"] == 1.0 and proposed["speedup"] == pytest.approx(notes["final"]["speedup"])
    assert board.list_metrics("demo/tiny-llama", "optimization") == []
    gate = OPTIMIZATION_STAGE.gate(ctx)
    assert gate.passed, (gate.summary, gate.report)
    assert len(gate.report["reports"]) == 2

    notes["final"]["speedup"] *= 2  # an inflated claim fails the notes gate
    (directory / "optimization_notes.json").write_text(json.dumps(notes))
    gate = OPTIMIZATION_STAGE.gate(ctx)
    assert not gate.passed and "check_optimization_notes.py" in gate.summary

    # a pass name the catalogue lacks is a bad setting: refused on the first attempt, saying which
    bad = replace(ctx, settings={**ctx.settings, "optimization_passes": "no_such_pass"})
    outcome = OPTIMIZATION_STAGE.run(bad)
    assert outcome.status == "failed" and outcome.diagnosis is not None and is_refusal(outcome.diagnosis)
    assert outcome.diagnosis["rule"] == "bad_setting"
    assert outcome.summary.startswith("optimization.passes: unknown pass(es): no_such_pass (known: "), outcome.summary


def test_bad_settings_fail_cleanly(board: BoardStore, board_path: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="optimization_pairs: Input should be greater than or equal to 5"):
        OptimizationSettings.from_sources({"optimization_pairs": 3})
    with pytest.raises(ValueError, match="unknown device"):
        OptimizationSettings.from_sources({"device": "tpu"})
    ctx = make_context(board, board_path, tmp_path, {"optimization_iters": "many"})
    outcome = OPTIMIZATION_STAGE.run(ctx)
    assert outcome.status == "failed" and "bad optimization setting" in outcome.summary
    assert outcome.diagnosis["rule"] == "bad_setting"  # a refusal, the same in every stage
    assert board.list_metrics("demo/tiny-llama") == []


def test_an_inconclusive_perf_gate_is_the_stage_gate_s_inconclusive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, board: BoardStore, board_path: Path
) -> None:
    """The perf checker's exit 3 (too noisy to decide) reaches the team lead as
    GateResult.inconclusive, not as a failure; real checker processes stand in for the two gates."""
    import optimization.stage as stage

    reports = {
        "check_optimization_notes.py": (0, {"adaptation": "x", "passed": True, "summary": "notes consistent"}),
        "check_accuracy_run_perf.py": (
            3,
            {"adaptation": "x", "passed": False, "inconclusive": True, "summary": "too noisy to decide now"},
        ),
    }
    for name, (code, report) in reports.items():
        (tmp_path / name).write_text(f"import json, sys\nprint(json.dumps({report!r}))\nsys.exit({code})\n")
    # The stage's row names these two checkers, in this order, in tmp_path (the notes first).
    row = stage.describe("optimization").model_copy(update={"package": tmp_path, "checkers": tuple(reports)})
    monkeypatch.setattr(stage, "describe", lambda name: row)
    ctx = make_context(board, board_path, tmp_path, {})
    result = OPTIMIZATION_STAGE.gate(ctx)
    assert not result.passed and result.inconclusive and "too noisy" in result.summary
