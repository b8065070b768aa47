"""OPTIMIZATION_STAGE end to end: real generator output, real uv environment, board metrics, gates.

Whether a pass is kept must not depend on the machine's load: the stage runs under strict
tolerances that bf16 and int8 cannot meet, so both are rejected on accuracy (a deterministic
outcome) and the gates check an honest no-gain run. A claimed gain is exercised with injected
measurements in test_optimization_notes_check.py and against a fresh paired re-measurement in
test_optimization_gates.py.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from adaptation.generator import generate
from adaptation.spec import AdaptationSpec, InputRecipe, ModelSource, Tolerances
from ascendbridge.board import BoardStore
from ascendbridge.board.records import Registration
from ascendbridge.config import adaptations_dir
from ascendbridge.stage_api import StageContext
from optimization.stage import OPTIMIZATION_STAGE, OptimizationSettings
from tests.optimization.conftest import STRICT
from tests.optimization.opt_support import demo_config


def make_context(board: BoardStore, board_path: Path, tmp_path: Path, settings: dict,
                 tolerances: Tolerances = Tolerances()) -> StageContext:
    model_dir = tmp_path / "models" / "tiny-llama"
    model_dir.mkdir(parents=True)
    (model_dir / "config.json").write_text(json.dumps(demo_config("tiny-llama")))
    (record, _), = board.register_models([Registration(model_id="demo/tiny-llama", source="local", path=str(model_dir))])
    task = board.list_tasks(stage="optimization", model_id=record.model_id)[0]
    directory = adaptations_dir() / record.adaptation_name
    spec = AdaptationSpec(
        name=record.adaptation_name,
        model=ModelSource(model_id=record.model_id, source="local", path=str(model_dir), has_weights=False),
        task_family="causal_lm", model_class="LlamaForCausalLM", model_type="llama",
        inputs=InputRecipe(batch_size=2, seq_len=32), tolerances=tolerances,
    )
    assert generate(spec, directory).ok
    return StageContext(model=record, task=task, adaptation_dir=directory, board_path=board_path,
                        log=io.StringIO(), settings=settings)


@pytest.mark.timeout(1200)
def test_stage_searches_runs_perf_records_and_passes_its_gates(board: BoardStore, board_path: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCENDBRIDGE_CPU_BF16", "native")  # bf16 measured (then rejected) on any CPU
    ctx = make_context(board, board_path, tmp_path, {"device": "cpu", "optimization_passes": "cpu_bf16_cast,cpu_int8_dynamic",
                                                     "optimization_iters": 2, "optimization_num_samples": 1},
                       Tolerances(**STRICT))
    outcome = OPTIMIZATION_STAGE.run(ctx)
    assert outcome.status == "done", (outcome.summary, outcome.diagnosis, ctx.log.getvalue()[-3000:])
    directory = ctx.adaptation_dir
    notes = json.loads((directory / "optimization_notes.json").read_text())
    assert (directory / "accuracy_run_perf.py").is_file() and notes["perf_run"]["metrics"].endswith("_perf.json")
    assert outcome.result["chosen"] == notes["chosen"] == [] and notes["runtime_only"] is True
    assert [(r["name"], r["measured"], r["kept"]) for r in notes["passes"]] == [
        ("cpu_bf16_cast", True, False), ("cpu_int8_dynamic", True, False)], notes["passes"]
    recorded = {m.name: m.value for m in board.list_metrics("demo/tiny-llama", "optimization")}
    assert recorded["accuracy_pass"] == 1.0 and recorded["speedup"] == pytest.approx(notes["final"]["speedup"])
    gate = OPTIMIZATION_STAGE.gate(ctx)
    assert gate.passed, (gate.summary, gate.report)
    assert len(gate.report["reports"]) == 2

    notes["final"]["speedup"] *= 2  # an inflated claim fails the notes gate
    (directory / "optimization_notes.json").write_text(json.dumps(notes))
    gate = OPTIMIZATION_STAGE.gate(ctx)
    assert not gate.passed and "check_optimization_notes.py" in gate.summary


def test_bad_settings_fail_cleanly(board: BoardStore, board_path: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="pairs >= 5"):
        OptimizationSettings.from_sources({"optimization_pairs": 3})
    with pytest.raises(ValueError, match="unknown device"):
        OptimizationSettings.from_sources({"device": "tpu"})
    ctx = make_context(board, board_path, tmp_path, {"optimization_iters": "many"})
    outcome = OPTIMIZATION_STAGE.run(ctx)
    assert outcome.status == "failed" and "bad optimization setting" in outcome.summary
    assert board.list_metrics("demo/tiny-llama") == []
