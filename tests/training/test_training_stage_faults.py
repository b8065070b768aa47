"""Guards through the training stage: one team-lead pass over a job whose run hangs (the hang watch
kills it and resumes from the last good checkpoint) and then meets an injected NaN (the run stops
with the diagnosis, the task fails on the first attempt and is not retried, nothing of a finished
run is written)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore
from tests.teamlead.tl_support import FAST
from tests.training.test_training_stage import _package
from training.figures import FIGURES_FILE, LOSS_CURVE, step_log


@pytest.mark.timeout(1200)
def test_a_hang_is_resumed_and_an_injected_nan_stops_the_task_with_its_diagnosis(
        board: BoardStore, torch_python: Path) -> None:
    package = _package(board, "demo/llama-nan", "full", torch_python)
    fault = {"hang_at_step": 3, "nan_at_step": 5}  # the harness's test-only injector (train.json "fault")
    lead = subprocess.run([sys.executable, "-m", "ascendbridge.teamlead", "--board", str(board.path), *FAST,
                           "--stages", "training", "--attempts", "2",
                           "--set", "training.threads=1", "--set", "training.checkpoint_every=2",
                           "--set", "training.contract_steps=2", "--set", "training.hang_k=2",
                           "--set", f"training.fault={json.dumps(fault)}"],
                          capture_output=True, text=True, timeout=1100)
    task = board.list_tasks(stage="training", model_id="demo/llama-nan")[0]
    assert task.status == "failed" and task.attempts == 1, (task, lead.stdout[-3000:], lead.stderr[-3000:])
    diagnosis = task.diagnosis or {}
    assert diagnosis["rule"] == "training_non_finite" and diagnosis["retryable"] is False, diagnosis
    assert diagnosis["summary"].startswith("training stopped: step 5: loss nan") and "not finite" in diagnosis["summary"]
    assert diagnosis["stop"]["step"] == 5
    # the hang at step 3 was detected, killed and resumed from the checkpoint of step 2 within the attempt
    assert (diagnosis["supervision"]["hangs"], diagnosis["supervision"]["restarts"]) == (1, 1), diagnosis["supervision"]
    run = package / "train/run"
    assert [s["step"] for s in step_log(run)] == [1, 2, 3, 4]  # the NaN step was not applied nor logged
    assert json.loads((run / "stopped.json").read_text())["rule"] == "non_finite"
    # the baseline contract ran without the fault; nothing of a finished run, no half-written checkpoint
    assert "fault" not in json.loads((package / "train/contract.json").read_text())
    assert json.loads((package / "train/train.json").read_text())["fault"] == fault
    for finished in ("train_result.json", FIGURES_FILE, LOSS_CURVE, "tensorboard"):
        assert not (run / finished).exists(), finished
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-000002", "step-000004"]
    assert not [p for p in package.rglob("*") if p.name.endswith(".tmp")]
