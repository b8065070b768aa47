"""The quantization stage on a real generated package: demo/tiny-llama32 (config-only, so its
weights are config-initialised from the recipe's seed and exported) quantized by the real
`msmodelslim quant` (W8A8_DYNAMIC, W8A16) and LLM-Compressor's oneshot (CT_W8A8), evaluated by reference, proposed with its figures and
gated in a fresh process; the gate refuses a swapped tensor (digest) and a doctored scale whose
digest was re-recorded (the fresh evaluation does not reproduce the figures). An encoder is skipped
with its reason before any tool runs."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore, Registration
from ascendbridge.package.generator import generate
from ascendbridge.package.spec import InputRecipe
from ascendbridge.stage_api import StageContext, StageOutcome
from ascendbridge.stages import STAGES
from bench.support.local_model import register_local
from quantization.evidence import weight_bytes
from quantization.gate import check_adaptation
from quantization.stage import QUANTIZATION_STAGE
from quantization.steps import EVIDENCE_FILE, WORK_DIR, checkpoint_digest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SCHEMES = ("W8A8_DYNAMIC", "W8A16", "CT_W8A8")
PRACTICES = {"W8A8_DYNAMIC": "default-w8a8", "W8A16": "default-w8a16"}


def context(
    board: BoardStore, board_path: Path, name: str, family: str, model_class: str, model_type: str, **settings: str
) -> StageContext:
    record, task, directory, spec = register_local(
        board, f"demo/{name}", REPO / "demo_models" / name, "quantization", family, model_class, model_type,
        inputs=InputRecipe(seq_len=16),
    )  # fmt: skip
    assert generate(spec, directory).ok
    return StageContext(
        model=record, task=task, adaptation_dir=directory, board_path=board_path, log=io.StringIO(), settings=settings
    )


def test_an_encoder_is_skipped_with_its_reason_before_any_tool(board: BoardStore, board_path: Path) -> None:
    # a tool interpreter that does not exist: reaching for it would fail the run, not skip it
    ctx = context(
        board, board_path, "tiny-bert", "feature_extraction", "AutoModel", "bert", quantization_python="/nonexistent"
    )
    outcome = QUANTIZATION_STAGE.run(ctx)
    assert outcome.status == "skipped", outcome.summary
    assert "causal LMs only" in outcome.summary and "feature_extraction" in outcome.summary
    assert not (ctx.adaptation_dir / WORK_DIR).exists()


def test_the_stage_is_opt_in_skipped_by_policy_until_retried(board: BoardStore) -> None:
    """runs = "optional": every model registers with it skipped by policy; a person's retry, once
    the stage before it is done, makes it pending and takes it off the model's skip list."""
    ((record, _),) = board.register_models([Registration(model_id="org/m", training=None)])
    assert "quantization" in record.skip_stages
    while (task := board.claim_next("w", 60)) is not None:
        board.complete_task(task.id, task.fencing_token, {"ok": True})
    status = {t.stage: t.status for t in board.list_tasks(model_id="org/m")}
    assert status["quantization"] == "skipped" and status["serving"] == "completed"
    assert STAGES.index("business_benchmark") + 1 == STAGES.index("quantization") == STAGES.index("serving") - 1
    assert board.retry("org/m", "quantization").status == "pending"
    assert "quantization" not in board.get_model("org/m").skip_stages


@pytest.fixture(scope="module")
def staged(quant_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StageContext, StageOutcome]]:
    """The stage run once on the demo Llama with the test's tool environment (its outcome, its context)."""
    root = tmp_path_factory.mktemp("quant-stage")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ASCENDBRIDGE_BOARD", str(root / "board.db"))
        patch.setenv("ASCENDBRIDGE_LOGS", str(root / "logs"))
        patch.setenv("ASCENDBRIDGE_ADAPTATIONS", str(root / "adaptations"))
        patch.setenv("ASCENDBRIDGE_QUANTIZATION_PYTHON", str(quant_python))  # the gate's checker process reads it
        (root / "adaptations").mkdir()
        board = BoardStore.init(root / "board.db")
        try:
            ctx = context(board, root / "board.db", "tiny-llama32", "causal_lm", "AutoModelForCausalLM", "llama")
            yield ctx, QUANTIZATION_STAGE.run(ctx)
        finally:
            board.close()


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_demo_llama_is_quantized_evaluated_and_gated(staged: tuple[StageContext, StageOutcome]) -> None:
    ctx, outcome = staged
    assert outcome.status == "done", (outcome.summary, ctx.log.getvalue()[-3000:])
    evidence = json.loads((ctx.adaptation_dir / EVIDENCE_FILE).read_text())
    assert evidence["usable"] == list(SCHEMES)
    calibration = (ctx.adaptation_dir / evidence["calibration"]["path"]).resolve()
    assert f"prepare dataset from {calibration} success" in ctx.log.getvalue()  # the tool calibrated with it
    assert evidence["calibration"]["n"] == 8 and evidence["model"]["mode"]
    for scheme in PRACTICES:
        record = evidence["schemes"][scheme]
        assert record["tool"]["name"] == "msmodelslim" and record["tool"]["version"] == "26.1.0"
        assert record["practice"]["id"] == PRACTICES[scheme] and record["format"] == "ascendv1"
        practice = (ctx.adaptation_dir / WORK_DIR / record["practice"]["file"]).read_text()
        assert str((ctx.adaptation_dir / evidence["calibration"]["path"]).resolve()) in practice
        description = json.loads(
            (ctx.adaptation_dir / record["checkpoint"] / "quant_model_description.json").read_text()
        )
        assert description["model_quant_type"] == scheme
    ct = evidence["schemes"]["CT_W8A8"]
    assert ct["tool"] == {"name": "llmcompressor", "version": "0.14.0.1", "compressed_tensors": "0.19.0"}
    assert ct["format"] == "compressed-tensors" and "SmoothQuantModifier" in ct["practice"]["source"]
    assert ct["argv"][2].endswith(evidence["calibration"]["path"])  # it calibrated with the recorded sample
    config = json.loads((ctx.adaptation_dir / ct["checkpoint"] / "config.json").read_text())
    assert config["quantization_config"]["quant_method"] == "compressed-tensors"
    for scheme in SCHEMES:
        record = evidence["schemes"][scheme]
        assert record["weight_bytes_after"] < record["weight_bytes_before"]
        assert 0.9 < record["figures"]["cosine_min"] < 1.0  # executed: the quantization changed the forward
    values = outcome.metrics[0].values
    assert values["w8a16_cosine_min"] > values["w8a8_dynamic_cosine_min"]
    assert values["w8a8_dynamic_accepted"] == values["w8a16_accepted"] == values["ct_w8a8_accepted"] == 1.0
    assert 0 < values["w8a8_dynamic_size_ratio"] < 1
    gate = QUANTIZATION_STAGE.gate(ctx)
    assert gate.passed, gate.summary
    assert gate.report["reevaluated"] == 3


def doctored(ctx: StageContext, python: Path, tmp_path: Path, how: str) -> Path:
    """A copy of the gated package whose W8A8 checkpoint was edited `how` (tests/quantization/doctor_checkpoint.py)."""
    copy = tmp_path / ctx.adaptation_dir.name
    shutil.copytree(ctx.adaptation_dir, copy, ignore=shutil.ignore_patterns(".venv"))
    checkpoint = copy / WORK_DIR / "W8A8_DYNAMIC"
    shutil.rmtree(checkpoint)
    source = ctx.adaptation_dir / WORK_DIR / "W8A8_DYNAMIC"
    subprocess.run([str(python), str(HERE / "doctor_checkpoint.py"), str(source), str(checkpoint), how], check=True)
    return copy


@pytest.mark.slow
def test_the_gate_refuses_a_swapped_tensor_by_its_digest(
    staged: tuple[StageContext, StageOutcome], quant_python: Path, tmp_path: Path
) -> None:
    copy = doctored(staged[0], quant_python, tmp_path, "swap")
    report = check_adaptation(copy, str(quant_python))
    assert not report.passed
    assert report.summary == "W8A8_DYNAMIC: the checkpoint's files differ from the recorded digest"
    assert report.reevaluated == 0  # refused before anything ran


@pytest.mark.slow
def test_the_gate_refuses_a_doctored_scale_even_with_its_digest_re_recorded(
    staged: tuple[StageContext, StageOutcome], quant_python: Path, tmp_path: Path
) -> None:
    copy = doctored(staged[0], quant_python, tmp_path, "scale")
    evidence_path = copy / EVIDENCE_FILE
    evidence = json.loads(evidence_path.read_text())
    record = evidence["schemes"]["W8A8_DYNAMIC"]  # a forger re-records what the files show
    record["digest"] = checkpoint_digest(copy / WORK_DIR / "W8A8_DYNAMIC")
    record["weight_bytes_before"], record["weight_bytes_after"] = weight_bytes(copy, "W8A8_DYNAMIC")
    evidence_path.write_text(json.dumps(evidence))
    report = check_adaptation(copy, str(quant_python))
    assert not report.passed
    assert report.reevaluated == 3
    assert any(p.startswith("W8A8_DYNAMIC: ") for p in report.problems), report.problems
    assert not any(p.startswith("W8A16: ") for p in report.problems), report.problems
