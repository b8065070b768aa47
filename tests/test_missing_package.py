"""Every stage that works on a model's package refuses, on its first attempt, when the package is
not there (deleted, or made under another adaptations folder than this team lead's), or when its
runtime is not this framework's (rendered before an update): a retry cannot change either, so the
diagnosis is a refusal with the remedy, never three retries (nor a run its gate must fail)."""

from __future__ import annotations

import io
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore, Registration
from ascendbridge.refusals import is_refusal, remedy
from ascendbridge.stage_api import Stage, StageContext
from bench.support.tiny_adaptations import make_adaptation

AFTER_ADAPTATION = ("healing", "benchmark", "optimization", "business_benchmark", "quantization", "serving")


def _stage(name: str) -> Stage:
    (point,) = [p for p in entry_points(group="ascendbridge.stages") if p.name == name]
    stage: Stage = point.load()
    return stage


@pytest.mark.parametrize("name", AFTER_ADAPTATION)
def test_a_stage_refuses_a_package_that_is_not_there(name: str, board: BoardStore, board_path: Path) -> None:
    ((record, _),) = board.register_models([Registration(model_id="org/gone", source="local", path="/nonexistent")])
    (task,) = board.list_tasks(stage=name, model_id=record.model_id)
    directory = board_path.parent / "adaptations" / record.adaptation_name  # never made
    log = io.StringIO()
    ctx = StageContext(model=record, task=task, adaptation_dir=directory, board_path=board_path, log=log)
    outcome = _stage(name).run(ctx)
    assert outcome.status == "failed" and outcome.diagnosis is not None, outcome
    assert outcome.diagnosis["rule"] == "missing_adaptation" and is_refusal(outcome.diagnosis)
    assert (
        outcome.summary == f"no adaptation.json in {directory}: the model's package is not in this adaptations folder"
    )
    assert "ASCENDBRIDGE_ADAPTATIONS" in remedy(outcome.diagnosis)
    assert "rollback MODEL --to adaptation" in remedy(outcome.diagnosis)


@pytest.mark.parametrize("name", AFTER_ADAPTATION)
def test_a_stage_refuses_a_package_rendered_with_another_runtime(
    name: str, board: BoardStore, board_path: Path
) -> None:
    directory = make_adaptation(board_path.parent, "tiny-bert")
    older = directory / "ab_runtime" / "harness.py"
    older.write_text(older.read_text() + "# as an earlier AscendBridge rendered it\n")
    ((record, _),) = board.register_models([Registration(model_id="demo/tiny-bert", source="local", path="/x")])
    (task,) = board.list_tasks(stage=name, model_id=record.model_id)
    ctx = StageContext(model=record, task=task, adaptation_dir=directory, board_path=board_path, log=io.StringIO())
    outcome = _stage(name).run(ctx)
    assert outcome.status == "failed" and outcome.diagnosis is not None, outcome
    assert outcome.diagnosis["rule"] == "outdated_runtime" and is_refusal(outcome.diagnosis), outcome.diagnosis
    assert outcome.summary == (
        "the package's runtime is not this framework's: ab_runtime/harness.py differs from the framework's copy "
        "(rendered by another version, or edited since)"
    )
    assert "rollback MODEL --to adaptation" in remedy(outcome.diagnosis)


def test_a_worker_in_the_package_compares_with_the_frameworks_runtime(board_path: Path) -> None:
    """A worker runs in the package's directory, where `import ab_runtime` finds the package's own
    copy: the framework's runtime is named from the checkout, so an outdated copy is still seen."""
    directory = make_adaptation(board_path.parent, "tiny-bert")
    older = directory / "ab_runtime" / "harness.py"
    older.write_text(older.read_text() + "# as an earlier AscendBridge rendered it\n")
    code = (
        "import ab_runtime; from ascendbridge.gatekit.integrity import runtime_problems; "
        "print(ab_runtime.__file__); print(runtime_problems('.'))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=directory, capture_output=True, text=True, timeout=120)
    imported, problems = proc.stdout.splitlines()
    assert Path(imported).resolve().is_relative_to(directory.resolve()), imported  # the package's copy
    assert "ab_runtime/harness.py differs from the framework's copy" in problems, proc.stdout + proc.stderr
