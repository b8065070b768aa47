"""Every stage that works on a model's package refuses, on its first attempt, when the package is
not there (deleted, or made under another adaptations folder than this team lead's): a retry
cannot make it appear, so the diagnosis is a refusal with the remedy, never three retries."""

from __future__ import annotations

import io
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore, Registration
from ascendbridge.refusals import is_refusal, remedy
from ascendbridge.stage_api import Stage, StageContext

AFTER_ADAPTATION = ("healing", "benchmark", "optimization", "business_benchmark", "serving")


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
