"""The training stage on the board: registration of a job, the policy skip, the accumulation
setting's refusal, and one team-lead pass (shared by the tests that read it) training a causal LM
(tiny-llama) and a masked LM (tiny-bert), full and LoRA, with gradient accumulation, through their
gate, and an edited log failing the gate."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ab_runtime.train.corpus import load_documents
from ascendbridge.board import BoardStore, Registration
from ascendbridge.board.records import TaskRecord, TrainingJob
from ascendbridge.config import REPO_ROOT
from ascendbridge.settings import Settings, SettingsError
from ascendbridge.stages import OPTIONAL_STAGES, STAGES
from tests.training.train_support import (
    CORPUS,
    QUICK_TRAINING,
    run_env,
    training_context,
    training_lead_argv,
    training_package,
)
from training.figures import EVENTS_DIR, event_scalars, read_events, step_log
from training.hub_data import source_record
from training.render import CONTRACT_CONFIG, TRAIN_CONFIG, render_package
from training.settings import TrainingSettings
from training.stage import TRAINING_STAGE

BOARD_OPS = REPO_ROOT / "scripts" / "board_ops.py"
CHECKER = REPO_ROOT / "training" / "scripts" / "check_training.py"


def board_ops(board: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BOARD_OPS), "--board", str(board), *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow  # real board_ops.py processes, one per bad input
def test_bad_training_input_is_refused_in_one_line_and_leaves_the_board_unchanged(
    board: BoardStore, tmp_path: Path
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    no_text = tmp_path / "titles.jsonl"
    no_text.write_text('{"title": "no text"}\n')
    for bad, says in (
        (["--train-data", str(tmp_path / "none.jsonl")], "is not a non-empty file"),
        (["--train-data", str(empty)], "is not a non-empty file"),
        (["--train-data", str(REPO_ROOT / "pyproject.toml")], "is not a corpus file"),
        # read as the harness reads it: a JSON object, not a list of records; records without text
        (["--train-data", str(REPO_ROOT / "demo_models" / "tiny-llama" / "config.json")], "a list of records"),
        (["--train-data", str(no_text)], "needs 'text', 'messages'"),
        (["--train-data", str(CORPUS), "--train-steps", "1"], "out of range (2.."),
        (["--train-data", str(CORPUS), "--train-method", "qlora"], "invalid choice"),
        (["--train-data", str(CORPUS), "--train-processes", "65"], "out of range (1..64)"),
        (["--train-steps", "10"], "need --train-data"),
    ):
        proc = board_ops(board.path, "register_model", "--model_id", "org/m", *bad)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and says in proc.stderr, (bad, proc.stderr)
    assert board.list_models() == []
    proc = board_ops(
        board.path,
        "register_model",
        "--model_id",
        "org/m",
        "--train-data",
        str(CORPUS),
        "--train-method",
        "lora",
        "--train-steps",
        "12",
        "--train-processes",
        "2",
    )
    assert proc.returncode == 0, proc.stderr
    assert board.get_model("org/m").training == TrainingJob(data=str(CORPUS), method="lora", steps=12, processes=2)
    assert "training" not in board.get_model("org/m").skip_stages
    # a registration file's corpus is relative to the file, like its model path
    (tmp_path / "corpus.jsonl").write_text(CORPUS.read_text())
    (tmp_path / "models.jsonl").write_text(
        json.dumps({"model_id": "org/n", "training": {"data": "corpus.jsonl"}}) + "\n"
    )
    assert board_ops(board.path, "register_many", str(tmp_path / "models.jsonl")).returncode == 0
    assert board.get_model("org/n").training == TrainingJob(data=str(tmp_path / "corpus.jsonl"))


@pytest.mark.parametrize(
    ("value", "says"),
    [(3, "training batch 8 does not split into 3 micro-batches"), (0, "accumulation"), ("two", "accumulation")],
)
def test_a_bad_accumulation_setting_is_refused_in_one_line(value: object, says: str) -> None:
    """What `--set training.accumulation=VALUE` meets: the team lead prints a SettingsError as its one
    line and exits 2 before any run."""
    with pytest.raises(SettingsError) as refused:
        Settings.resolve({"training": {"accumulation": value}})
    assert says in str(refused.value) and "\n" not in str(refused.value)
    assert Settings.resolve({"training": {"accumulation": 4}}).of(TrainingSettings).accumulation == 4


@pytest.mark.parametrize("value", [-1, "half", True, float("inf"), "null", [0.5]])
def test_a_bad_bf16_weights_above_setting_is_refused_in_one_line(value: object) -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.resolve({"training": {"bf16_weights_above": value}})
    assert "bf16_weights_above" in str(refused.value) and "is not a fraction >= 0" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_bad_bf16_weights_above_stops_the_team_lead_before_anything_runs(tmp_path: Path) -> None:
    board = tmp_path / "board.db"
    proc = subprocess.run(
        training_lead_argv(board, sets=["training.bf16_weights_above=-0.5"]),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "bf16_weights_above: -0.5 is not a fraction >= 0" in proc.stderr and not board.exists()


@pytest.mark.parametrize(("value", "rendered"), [(None, 1.0), (0.5, 0.5), ("0.25", 0.25), (0, 0.0), ("off", None)])
def test_bf16_weights_above_reaches_the_rendered_training_config(
    tmp_path: Path, value: object, rendered: float | None
) -> None:
    """`--set training.bf16_weights_above=VALUE` (unset: the harness's default 1.0; off: its null, the size
    rule off) in the train.json and contract.json render_package writes."""
    settings = Settings.resolve({"training": {} if value is None else {"bf16_weights_above": value}}).of(
        TrainingSettings
    )
    render_package(tmp_path, "demo/m", "/models/tiny", TrainingJob(data=str(CORPUS), steps=6), settings)
    for config in (TRAIN_CONFIG, CONTRACT_CONFIG):
        assert json.loads((tmp_path / config).read_text())["bf16_weights_above"] == rendered


def test_without_a_job_training_is_skipped_with_the_reason_and_the_pipeline_goes_on(board: BoardStore) -> None:
    board.register_models([Registration(model_id="org/plain")])
    assert board.get_model("org/plain").skip_stages == sorted({"training"} | OPTIONAL_STAGES)
    for stage in STAGES[: STAGES.index("training")]:
        task = board.list_tasks(stage=stage, model_id="org/plain")[0]
        claimed = board.claim_task(task.id, "test", 60.0)
        board.complete_task(claimed.id, claimed.fencing_token, {"summary": "ok"})
    states = {t.stage: t.status for t in board.list_tasks(model_id="org/plain")}
    assert states["training"] == "skipped" and states["benchmark"] == "pending"
    assert any(
        e.message == "training skipped by policy (no training job registered)" for e in board.list_events("org/plain")
    )


def _package(
    board: BoardStore,
    model_id: str,
    method: str,
    python: Path,
    data: str = str(CORPUS),
    model: str = "tiny-llama",
    processes: int = 1,
) -> Path:
    """A demo model registered with a job, its package generated, the stages before training
    skipped and its environment the shared torch environment (system mode: no `uv sync` of torch)."""
    job = TrainingJob(data=data, method=method, steps=6, processes=processes)
    _, directory = training_package(board, model_id, job, model, python)
    for stage in STAGES[: STAGES.index("training")]:
        board.skip(model_id, stage)
    return directory


JOBS = {
    "demo/llama-full": ("tiny-llama", "full"),
    "demo/llama-lora": ("tiny-llama", "lora"),
    "demo/bert-full": ("tiny-bert", "full"),
    "demo/bert-lora": ("tiny-bert", "lora"),
}
ACCUMULATION = 2  # the stage setting every job of the shared pass trains with: batch 8 as 2 micro-batches of 4


@dataclass
class Trained:
    """One team-lead pass over the four jobs (a causal and a masked LM, full and LoRA), shared by
    the tests that read its board and packages (each pass costs about a minute)."""

    board: BoardStore
    packages: dict[str, Path]
    stories: Path  # the `hf:` dataset directory the llama LoRA job trained from
    lead: subprocess.CompletedProcess[str]

    def task(self, model_id: str) -> TaskRecord:
        return self.board.list_tasks(stage="training", model_id=model_id)[0]

    def figures(self, model_id: str) -> dict[str, float]:
        return {m.name: m.value for m in self.board.list_metrics(model_id, "training")}

    def completed(self, model_id: str) -> None:
        task = self.task(model_id)
        assert task.status == "completed", (
            model_id,
            task.diagnosis,
            self.lead.stdout[-3000:],
            self.lead.stderr[-3000:],
        )


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, torch_python: Path) -> Iterator[Trained]:
    tmp = tmp_path_factory.mktemp("trained")
    (tmp / "adaptations").mkdir()
    with pytest.MonkeyPatch.context() as env:
        for name, value in (("BOARD", tmp / "board.db"), ("LOGS", tmp / "logs"), ("ADAPTATIONS", tmp / "adaptations")):
            env.setenv(f"ASCENDBRIDGE_{name}", str(value))
        board = BoardStore.init(tmp / "board.db")
        # the llama LoRA job's corpus is a dataset the `datasets` library loads (a local dataset directory: no Hub here)
        stories = tmp / "stories"
        stories.mkdir()
        shutil.copyfile(CORPUS, stories / "train.jsonl")
        packages = {
            model_id: _package(
                board,
                model_id,
                method,
                torch_python,
                model=model,
                data=f"hf:{stories}" if model_id == "demo/llama-lora" else str(CORPUS),
            )
            for model_id, (model, method) in JOBS.items()
        }
        lead = subprocess.run(
            training_lead_argv(
                board.path,
                "--workers",
                "2",
                "--attempts",
                "1",
                sets=[*QUICK_TRAINING, f"training.accumulation={ACCUMULATION}"],
            ),
            capture_output=True,
            text=True,
            timeout=1500,
            env={**os.environ, "HF_DATASETS_CACHE": str(tmp / "hf-datasets"), "HF_HUB_OFFLINE": "1"},
        )
        yield Trained(board, packages, stories, lead)
        board.close()


LORA_PROBE = """
import json, sys
from pathlib import Path
from ab_runtime.train.checkpoint import latest_good_checkpoint
from ab_runtime.train.harness import TrainConfig, Trainer
cfg = TrainConfig.load(Path(sys.argv[1]))
trainer = Trainer(cfg, Path(sys.argv[3]))
before = trainer.snapshot()
trainer.load_checkpoint(latest_good_checkpoint(Path(sys.argv[2])))
print(json.dumps(trainer.adapter_only_changed(before)))
"""


def _adapters_only_changed(package: Path, python: Path, tmp_path: Path) -> None:
    """LoRA: the final checkpoint differs from the initial weights in the adapters only."""
    probe = subprocess.run(
        [str(python), "-c", LORA_PROBE, "train/train.json", "train/run", str(tmp_path / "probe")],
        capture_output=True,
        text=True,
        timeout=300,
        env=run_env(),
        cwd=package,
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    changed = json.loads(probe.stdout.splitlines()[-1])
    assert changed["adapters"] and changed["other"] == []


@pytest.mark.timeout(1800)
def test_the_host_is_accepted_before_the_jobs_once_per_host_and_stack(trained: Trained) -> None:
    """The preflight's record reaches the board with the attempt (training/preflight.py); a job after it
    on the same host and stack reads it back (on a host with several timed slots, jobs that start
    together may each measure before the first record lands)."""
    (record,) = trained.board.host_acceptances()
    assert record.host == socket.gethostname() and record.device_kind == "cpu", record
    assert record.data["measurement"]["figures"]["gemm_float32"]["value"] > 0
    measured = trained.board.events_of_kind("host_acceptance")
    assert 1 <= len(measured) <= len(JOBS) and {e.data["stack_id"] for e in measured} == {record.stack_id}


@pytest.mark.timeout(1800)
def test_a_causal_lm_trains_full_and_lora_through_the_team_lead(
    trained: Trained, tmp_path: Path, torch_python: Path
) -> None:
    for model_id in ("demo/llama-full", "demo/llama-lora"):
        trained.completed(model_id)
        figures = trained.figures(model_id)
        assert figures["contract_passed"] == 1.0 and figures["steps"] == 6.0 and figures["tokens_per_s"] > 0
        assert figures["loss_last"] < figures["loss_first"]  # a learnable corpus
        assert figures["eval_perplexity_after"] > 0 and "eval_masked_accuracy_after" not in figures
    full, lora = trained.packages["demo/llama-full"], trained.packages["demo/llama-lora"]
    assert (full / "train/run/loss_curve.png").is_file()
    # where the attempt's time went: each train.py command its own phase (docs/evidence.md)
    (_, attempt), *_ = trained.board.list_attempts("demo/llama-full", "training")
    assert {"contract", "pass_search", "training", "profile"} <= set(attempt.cost_profile or {}), attempt.cost_profile
    # the profiled window: a trace, a table whose operators are ranked, FLOPs per token (LoRA trains fewer)
    profile = json.loads((full / "train/run/profile.json").read_text())
    assert (full / "train/run" / profile["trace"]).is_file() and profile["table"]["steps"] == 3
    assert profile["table"]["operators"][0]["ms"] >= profile["table"]["operators"][-1]["ms"] > 0
    full_flops, lora_flops = (trained.figures(m)["flops_per_token"] for m in ("demo/llama-full", "demo/llama-lora"))
    assert 0 < lora_flops < full_flops and trained.figures("demo/llama-full")["model_tflops"] > 0
    events = read_events(full / "train/run" / EVENTS_DIR)
    assert events == event_scalars(full / "train/run") and len(events["train/loss"]) == 6
    cached = lora / "train/data/stories.train.jsonl"  # the dataset, cached into the package as the corpus
    assert json.loads((lora / "train/train.json").read_text())["corpus"] == "train/data/stories.train.jsonl"
    assert load_documents(cached) == load_documents(CORPUS)
    assert json.loads(source_record(cached).read_text())["reference"] == f"hf:{trained.stories}"
    _adapters_only_changed(lora, torch_python, tmp_path)


@pytest.mark.timeout(1800)
def test_a_masked_lm_trains_full_and_lora_through_the_team_lead_evaluated_by_masked_accuracy(
    trained: Trained, tmp_path: Path, torch_python: Path
) -> None:
    for model_id in ("demo/bert-full", "demo/bert-lora"):
        trained.completed(model_id)  # the team lead completes a task only once its gate passed
        figures = trained.figures(model_id)
        assert figures["contract_passed"] == 1.0 and figures["steps"] == 6.0 and figures["tokens_per_s"] > 0
        assert (
            0.0 <= figures["eval_masked_accuracy_before"] <= 1.0 and 0.0 <= figures["eval_masked_accuracy_after"] <= 1.0
        )
        assert "eval_perplexity_after" not in figures
        result = json.loads((trained.packages[model_id] / "train/run/train_result.json").read_text())
        assert result["paradigm"] == "masked_lm"
        events = read_events(trained.packages[model_id] / "train/run" / EVENTS_DIR)
        assert [v for _, v in events["eval/masked_accuracy"]] == pytest.approx(
            [figures["eval_masked_accuracy_before"], figures["eval_masked_accuracy_after"]]
        )
    _adapters_only_changed(trained.packages["demo/bert-lora"], torch_python, tmp_path)


@pytest.mark.timeout(1800)
def test_gradient_accumulation_is_a_stage_setting_that_reaches_the_run_and_its_figures(trained: Trained) -> None:
    for model_id, package in trained.packages.items():
        trained.completed(model_id)
        assert json.loads((package / "train/train.json").read_text())["accumulation"] == ACCUMULATION
        assert {(s["accumulation"], s["micro_batch"]) for s in step_log(package / "train/run")} == {(ACCUMULATION, 4)}
        figures = trained.figures(model_id)
        assert (figures["micro_batch"], figures["oom_fallbacks"]) == (4.0, 0.0)  # batch 8 / 2, no ladder rung taken


@pytest.mark.timeout(1800)
def test_an_edited_loss_log_or_ladder_figure_fails_the_gate(trained: Trained) -> None:
    full = trained.packages["demo/llama-full"]
    trained.completed("demo/llama-full")
    log, result = full / "train/run/metrics.jsonl", full / "train/run/train_result.json"
    originals = {path: path.read_text() for path in (log, result)}
    try:
        lines = originals[log].splitlines()
        edited = json.loads(lines[4])
        edited["loss"] -= 0.01
        log.write_text("\n".join([*lines[:4], json.dumps(edited), *lines[5:]]) + "\n")
        result.write_text(json.dumps({**json.loads(originals[result]), "micro_batch": 2}))
        gate = subprocess.run(
            [sys.executable, str(CHECKER), "--adaptation-dir", str(full), "--json"],
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:  # the other tests read this package too
        for path, text in originals.items():
            path.write_text(text)
    report = json.loads(gate.stdout)
    assert gate.returncode == 1 and not report["passed"]
    assert any("log_matches_step-000006" in p for p in report["problems"]), report["problems"]
    assert any("TensorBoard events" in p for p in report["problems"]), report["problems"]
    assert any(p.startswith("figure micro_batch") for p in report["problems"]), report["problems"]
    assert any("micro-batch 2 in train_result.json, 4 at the last step" in p for p in report["problems"]), report[
        "problems"
    ]


def test_a_paradigm_the_harness_refuses_fails_on_the_first_attempt_with_the_reason(
    board: BoardStore, torch_python: Path
) -> None:
    job = TrainingJob(data=str(CORPUS), steps=4)
    record, directory = training_package(board, "demo/classifier", job, "tiny-bert-classifier", torch_python)
    ctx = training_context(board, record, directory, {"training_threads": 1})
    outcome = TRAINING_STAGE.run(ctx)
    assert outcome.status == "failed" and outcome.diagnosis["rule"] == "training_refused", (outcome, ctx.log.getvalue())
    assert outcome.diagnosis["retryable"] is False and "BertForSequenceClassification" in outcome.summary
    assert not (directory / "train/run/metrics.jsonl").exists()  # nothing trained
