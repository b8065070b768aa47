"""Guards through the training stage: one team-lead pass over a job whose run hangs (the hang watch
kills it and resumes from the last good checkpoint) and then meets an injected NaN (the run stops
with the diagnosis, the task fails on the first attempt and is not retried, nothing of a finished
run is merged into the package)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ab_runtime.train.supervise import MIN_HANG_S, supervise
from ascendbridge.board import BoardStore
from ascendbridge.board.records import TrainingJob
from tests.training.test_training_stage import _package
from tests.training.train_support import CORPUS, QUICK_TRAINING, training_context, training_lead_argv
from training.render import CONTRACT_CONFIG, TRAIN_CONFIG, configs, contract_config
from training.settings import TrainingSettings
from training.stage import TRAINING_STAGE


@pytest.mark.timeout(1200)
def test_a_hang_is_resumed_and_an_injected_nan_stops_the_task_with_its_diagnosis(
    board: BoardStore, torch_python: Path
) -> None:
    package = _package(board, "demo/llama-nan", "full", torch_python)
    fault = {"hang_at_step": 3, "nan_at_step": 5}  # the harness's test-only injector (train.json "fault")
    lead = subprocess.run(
        training_lead_argv(
            board.path,
            "--attempts",
            "2",
            # hang_k=2: 5 s, MIN_HANG_S
            sets=[*QUICK_TRAINING, "training.hang_k=2", f"training.fault={json.dumps(fault)}"],
        ),
        capture_output=True,
        text=True,
        timeout=1100,
    )
    task = board.list_tasks(stage="training", model_id="demo/llama-nan")[0]
    assert task.status == "failed" and task.attempts == 1, (task, lead.stdout[-3000:], lead.stderr[-3000:])
    diagnosis = task.diagnosis or {}
    assert diagnosis["rule"] == "training_non_finite" and diagnosis["retryable"] is False, diagnosis
    assert (
        diagnosis["summary"].startswith("training stopped: step 5: loss nan") and "not finite" in diagnosis["summary"]
    )
    assert diagnosis["stop"]["step"] == 5 and diagnosis["stop"]["rule"] == "non_finite"
    # the hang at step 3 was detected, killed and resumed from the checkpoint of step 2 within the attempt
    supervision = diagnosis["supervision"]
    assert (supervision["hangs"], supervision["restarts"]) == (1, 1), supervision
    assert [e["last_step"] for e in supervision["events"]] == [2]
    log = Path(diagnosis["log_path"]).read_text()  # the attempt's log: the steps, the hang, the resume, the stop
    assert all(f"step {n}/6 loss" in log for n in (1, 2, 3, 4)) and "step 5/6" not in log
    assert log.count("error: step 5: loss nan") == 1  # stopped once: a stopping run is not taken for a hung one
    # a failed attempt's copy of the package is discarded: nothing of the run, nothing half-written
    assert not (package / "train").exists() and not (package / "train.py").exists()
    assert not [p for p in package.parent.rglob("*") if p.name.endswith(".tmp")]


def test_the_fault_and_the_accumulation_reach_the_run_config_and_the_contract_judges_without_the_fault() -> None:
    job = TrainingJob(data=str(CORPUS), steps=6)
    written = configs("/models/tiny", job, TrainingSettings(fault={"nan_at_step": 5}, accumulation=2))
    train, contract = written[TRAIN_CONFIG], written[CONTRACT_CONFIG]
    assert (train["fault"], train["accumulation"], contract["accumulation"]) == ({"nan_at_step": 5}, 2, 2)
    assert "fault" not in contract and contract == contract_config(train, 4)
    assert "fault" not in configs("/models/tiny", job, TrainingSettings())[TRAIN_CONFIG]  # a real job's config has none


@pytest.mark.parametrize(
    ("settings", "mask", "rule"),
    [({"training_accumulation": 4}, None, "training_batch_split"), ({"device": "cuda"}, "0,1", "training_cards_short")],
)
def test_a_job_its_processes_cannot_run_is_refused_before_anything_is_written(
    board: BoardStore,
    torch_python: Path,
    monkeypatch: pytest.MonkeyPatch,
    settings: dict[str, object],
    mask: str | None,
    rule: str,
) -> None:
    """Three processes: batch 8 does not split over 3 x 4 micro-batches; on CUDA a claim of two cards
    (the team lead's mask) has no card for the third rank. Either way the first attempt is final and
    writes nothing."""
    if mask is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", mask)
    package = _package(board, "demo/llama-three", "full", torch_python, processes=3)
    ctx = training_context(board, board.get_model("demo/llama-three"), package, settings)
    outcome = TRAINING_STAGE.run(ctx)
    assert outcome.status == "failed" and outcome.diagnosis["rule"] == rule and outcome.diagnosis["retryable"] is False
    if mask is not None:
        assert "need a card each but this task's claim holds 2 (CUDA_VISIBLE_DEVICES=0,1)" in outcome.summary
    assert "3 process" in outcome.summary and not (package / "train").exists()


SLOW_EXIT = """
import json, sys, time
from pathlib import Path
out, stop = Path(sys.argv[1]), sys.argv[2] == "stop"
(out / "metrics.jsonl").write_text(json.dumps({"step": 1, "step_time_s": 0.01}) + "\\n")
(out / "heartbeat.json").write_text(json.dumps({"step": 1, "time": time.time(), "phase": "train"}))
if stop:  # what run.py writes when a guard stops the run, before the interpreter's exit
    (out / "stopped.json").write_text(json.dumps({"rule": "non_finite", "step": 2}))
time.sleep(float(sys.argv[3]))
sys.exit(1)
"""


@pytest.mark.slow  # real supervised processes that wait out the hang clock
@pytest.mark.parametrize("stop", [True, False])
def test_a_run_a_guard_stopped_is_left_to_exit_not_taken_for_a_hang(tmp_path: Path, stop: bool) -> None:
    """Under load a stopped run's exit (torch's teardown) can outlast the step clock; killing and
    resuming it would redo the steps and stop again. Without the diagnosis the same silence is a hang."""
    summary = supervise(
        [sys.executable, "-c", SLOW_EXIT, str(tmp_path), "stop" if stop else "run", str(MIN_HANG_S + 2)],
        tmp_path,
        k=2,
        max_restarts=0,
        startup_s=60,
    )
    assert (summary["hangs"], summary["exit_code"]) == ((0, 1) if stop else (1, -9)), summary  # -9: killed


def test_a_proxys_depth_reaches_the_training_configs_and_the_gate_holds_them_to_it(tmp_path: Path) -> None:
    """A model registered with `--depth 1`: train.json and contract.json carry `proxy_depth` (the harness
    builds that depth); a training config that trains another depth than the spec's model fails the gate."""
    from ascendbridge.package.generator import render_adaptation
    from ascendbridge.package.spec import AdaptationSpec, ModelSource, ProxyDepth
    from training.gate import check_adaptation
    from training.render import render_package

    proxy = ProxyDepth(layers=1, of=2)
    model = ModelSource(model_id="demo/m", source="local", path="/models/tiny", has_weights=False, proxy=proxy)
    directory = tmp_path / "demo__m"
    render_adaptation(
        AdaptationSpec(name="demo__m", model=model, task_family="causal_lm", model_class="LlamaForCausalLM"), directory
    )
    job = TrainingJob(data=str(CORPUS), steps=6)
    render_package(directory, "demo/m", "/models/tiny", job, TrainingSettings(), proxy_depth=1)
    for config in (TRAIN_CONFIG, CONTRACT_CONFIG):
        assert json.loads((directory / config).read_text())["proxy_depth"] == 1
    held = check_adaptation(directory, execute=False)  # no run yet: its evidence is missing, its config is right
    assert not held.passed and not any("trains depth" in p for p in held.problems), held.problems
    render_package(
        directory, "demo/m", "/models/tiny", job, TrainingSettings()
    )  # the full model under the proxy's spec
    report = check_adaptation(directory, execute=False)
    assert f"{TRAIN_CONFIG} trains depth full; the registered model is proxy: 1 of 2 layers" in report.problems
