"""The training stage on the board: registration of a job, the policy skip, and tiny-llama trained
through the real team lead (full and LoRA), its gate, and an edited log failing the gate."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ab_runtime.train.corpus import load_documents
from ascendbridge.board import BoardStore, Registration
from ascendbridge.board.records import TrainingJob
from ascendbridge.config import REPO_ROOT
from ascendbridge.package.generator import generate
from ascendbridge.package.spec import AdaptationSpec, ModelSource
from ascendbridge.stage_api import StageContext
from ascendbridge.stages import STAGES
from tests.teamlead.tl_support import FAST
from tests.training.train_support import CORPUS, DEMO, run_env
from training.figures import EVENTS_DIR, event_scalars, read_events
from training.hub_data import source_record
from training.stage import TRAINING_STAGE

BOARD_OPS = REPO_ROOT / "scripts" / "board_ops.py"
CHECKER = REPO_ROOT / "training" / "scripts" / "check_training.py"


def board_ops(board: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BOARD_OPS), "--board", str(board), *args], capture_output=True,
                          text=True, timeout=120)


def test_bad_training_input_is_refused_in_one_line_and_leaves_the_board_unchanged(board: BoardStore, tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for bad, says in ((["--train-data", str(tmp_path / "none.jsonl")], "is not a non-empty file"),
                      (["--train-data", str(empty)], "is not a non-empty file"),
                      (["--train-data", str(REPO_ROOT / "pyproject.toml")], "is not a corpus file"),
                      (["--train-data", str(CORPUS), "--train-steps", "1"], "out of range (2.."),
                      (["--train-data", str(CORPUS), "--train-method", "qlora"], "invalid choice"),
                      (["--train-steps", "10"], "need --train-data")):
        proc = board_ops(board.path, "register_model", "--model_id", "org/m", *bad)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and says in proc.stderr, (bad, proc.stderr)
    assert board.list_models() == []
    proc = board_ops(board.path, "register_model", "--model_id", "org/m", "--train-data", str(CORPUS),
                     "--train-method", "lora", "--train-steps", "12")
    assert proc.returncode == 0, proc.stderr
    assert board.get_model("org/m").training == TrainingJob(data=str(CORPUS), method="lora", steps=12)
    assert "training" not in board.get_model("org/m").skip_stages
    # a registration file's corpus is relative to the file, like its model path
    (tmp_path / "corpus.jsonl").write_text(CORPUS.read_text())
    (tmp_path / "models.jsonl").write_text(json.dumps({"model_id": "org/n", "training": {"data": "corpus.jsonl"}}) + "\n")
    assert board_ops(board.path, "register_many", str(tmp_path / "models.jsonl")).returncode == 0
    assert board.get_model("org/n").training == TrainingJob(data=str(tmp_path / "corpus.jsonl"))


def test_without_a_job_training_is_skipped_with_the_reason_and_the_pipeline_goes_on(board: BoardStore) -> None:
    board.register_models([Registration(model_id="org/plain")])
    assert board.get_model("org/plain").skip_stages == ["training"]
    for stage in STAGES[:STAGES.index("training")]:
        task = board.list_tasks(stage=stage, model_id="org/plain")[0]
        claimed = board.claim_task(task.id, "test", 60.0)
        board.complete_task(claimed.id, claimed.fencing_token, {"summary": "ok"})
    states = {t.stage: t.status for t in board.list_tasks(model_id="org/plain")}
    assert states["training"] == "skipped" and states["benchmark"] == "pending"
    assert any(e.message == "training skipped by policy (no training job registered)"
               for e in board.list_events("org/plain"))


def _package(board: BoardStore, model_id: str, method: str, python: Path, data: str = str(CORPUS)) -> Path:
    """tiny-llama registered with a job, its package generated, the stages before training skipped
    and its environment the shared torch environment (system mode: no `uv sync` of torch)."""
    (record, _), = board.register_models([Registration(
        model_id=model_id, source="local", path=str(DEMO / "tiny-llama"),
        training=TrainingJob(data=data, method=method, steps=6))])
    spec = AdaptationSpec(name=record.adaptation_name, task_family="causal_lm", model_class="LlamaForCausalLM",
                          model_type="llama", model=ModelSource(model_id=model_id, source="local",
                                                                path=str(DEMO / "tiny-llama"), has_weights=False))
    directory = Path(board.path).parent / "adaptations" / record.adaptation_name
    assert generate(spec, directory).ok
    board.set_env_mode(model_id, "system", str(python))
    for stage in STAGES[:STAGES.index("training")]:
        board.skip(model_id, stage)
    return directory


LORA_PROBE = """
import json, sys
from pathlib import Path
from ab_runtime.train.harness import TrainConfig, Trainer, latest_good_checkpoint
cfg = TrainConfig.load(Path(sys.argv[1]))
trainer = Trainer(cfg, Path(sys.argv[3]))
before = trainer.snapshot()
trainer.load_checkpoint(latest_good_checkpoint(Path(sys.argv[2])))
print(json.dumps(trainer.adapter_only_changed(before)))
"""


@pytest.mark.timeout(900)
def test_full_and_lora_jobs_train_through_the_team_lead_and_an_edited_log_fails_the_gate(
        board: BoardStore, tmp_path: Path, torch_python: Path) -> None:
    full = _package(board, "demo/llama-full", "full", torch_python)
    # the LoRA job's corpus is a dataset the `datasets` library loads (a local dataset directory: no Hub here)
    stories = tmp_path / "stories"
    stories.mkdir()
    shutil.copyfile(CORPUS, stories / "train.jsonl")
    lora = _package(board, "demo/llama-lora", "lora", torch_python, data=f"hf:{stories}")
    lead = subprocess.run([sys.executable, "-m", "ascendbridge.teamlead", "--board", str(board.path), *FAST,
                           "--stages", "training", "--workers", "2", "--attempts", "1",
                           "--set", "training.threads=1", "--set", "training.checkpoint_every=2",
                           "--set", "training.contract_steps=2"],
                          capture_output=True, text=True, timeout=840,
                          env={**os.environ, "HF_DATASETS_CACHE": str(tmp_path / "hf-datasets"), "HF_HUB_OFFLINE": "1"})
    states = {(t.model_id, t.stage): t for t in board.list_tasks(stage="training")}
    for model_id in ("demo/llama-full", "demo/llama-lora"):
        task = states[(model_id, "training")]
        assert task.status == "completed", (model_id, task.diagnosis, lead.stdout[-3000:], lead.stderr[-3000:])
        figures = {m.name: m.value for m in board.list_metrics(model_id, "training")}
        assert figures["contract_passed"] == 1.0 and figures["steps"] == 6.0 and figures["tokens_per_s"] > 0
        assert figures["loss_last"] < figures["loss_first"]  # a learnable corpus
    assert (full / "train/run/loss_curve.png").is_file()
    events = read_events(full / "train/run" / EVENTS_DIR)
    assert events == event_scalars(full / "train/run") and len(events["train/loss"]) == 6
    cached = lora / "train/data/stories.train.jsonl"  # the dataset, cached into the package as the corpus
    assert json.loads((lora / "train/train.json").read_text())["corpus"] == "train/data/stories.train.jsonl"
    assert load_documents(cached) == load_documents(CORPUS)
    assert json.loads(source_record(cached).read_text())["reference"] == f"hf:{stories}"
    # LoRA: the final checkpoint differs from the initial weights in the adapters only
    probe = subprocess.run([str(torch_python), "-c", LORA_PROBE, "train/train.json", "train/run", str(tmp_path / "probe")],
                           capture_output=True, text=True, timeout=300, env=run_env(), cwd=lora)
    assert probe.returncode == 0, probe.stderr[-3000:]
    changed = json.loads(probe.stdout.splitlines()[-1])
    assert changed["adapters"] and changed["other"] == []
    # the gate passed (the team lead completed the task only then); an edited loss fails it
    log = full / "train/run/metrics.jsonl"
    lines = log.read_text().splitlines()
    edited = json.loads(lines[4])
    edited["loss"] -= 0.01
    log.write_text("\n".join([*lines[:4], json.dumps(edited), *lines[5:]]) + "\n")
    gate = subprocess.run([sys.executable, str(CHECKER), "--adaptation-dir", str(full), "--json"],
                          capture_output=True, text=True, timeout=600)
    report = json.loads(gate.stdout)
    assert gate.returncode == 1 and not report["passed"]
    assert any("log_matches_step-000006" in p for p in report["problems"]), report["problems"]
    assert any("TensorBoard events" in p for p in report["problems"]), report["problems"]


def test_a_paradigm_the_harness_refuses_fails_on_the_first_attempt_with_the_reason(
        board: BoardStore, torch_python: Path) -> None:
    (record, task), = [(r, board.list_tasks(stage="training", model_id=r.model_id)[0]) for r, _ in board.register_models(
        [Registration(model_id="demo/classifier", source="local", path=str(DEMO / "tiny-bert-classifier"),
                      training=TrainingJob(data=str(CORPUS), steps=4))])]
    spec = AdaptationSpec(name=record.adaptation_name, task_family="sequence_classification",
                          model_class="BertForSequenceClassification", model_type="bert",
                          model=ModelSource(model_id=record.model_id, source="local",
                                            path=str(DEMO / "tiny-bert-classifier"), has_weights=False))
    directory = Path(board.path).parent / "adaptations" / record.adaptation_name
    assert generate(spec, directory).ok
    record = board.set_env_mode(record.model_id, "system", str(torch_python))
    ctx = StageContext(model=record, task=task, adaptation_dir=directory, board_path=Path(board.path), log=io.StringIO(),
                       settings={"training_threads": 1})
    outcome = TRAINING_STAGE.run(ctx)
    assert outcome.status == "failed" and outcome.diagnosis["rule"] == "training_refused", (outcome, ctx.log.getvalue())
    assert outcome.diagnosis["retryable"] is False and "BertForSequenceClassification" in outcome.summary
    assert not (directory / "train/run/metrics.jsonl").exists()  # nothing trained
