"""LLM-Compressor quantizes a real (random-weight) causal LM to a compressed-tensors W8A8 checkpoint on
this CPU with the stage's own script; compressed-tensors' own library reads it back (its config
parser, its ModelCompressor, transformers' compressed-tensors loader), and decompresses every
weight to exactly what ab_runtime.quant reads; the reference forward's figures are within the W8A8
row; a doctored checkpoint is refused or fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quantization.steps import CALIBRATION, LLMCOMPRESSOR_SCRIPT
from tests.quantization.quant_support import HERE, evaluate, run, with_runtime

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def checkpoint(quant_python: Path, model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ct") / "CT_W8A8"
    output = run([quant_python, LLMCOMPRESSOR_SCRIPT, model_dir, CALIBRATION, out], timeout=900)
    record = json.loads(output.strip().splitlines()[-1].removeprefix("LLMCOMPRESSOR="))
    assert record["tool_version"] == "0.14.0.1" and record["compressed_tensors_version"] == "0.19.0"
    assert record["calibration_n"] == 8
    return out


def test_compressed_tensors_own_library_loads_it_as_we_read_it(
    quant_python: Path, model_dir: Path, checkpoint: Path
) -> None:
    output = run([quant_python, HERE / "ct_library_check.py", checkpoint, model_dir], timeout=600, env=with_runtime())
    seen = json.loads(output.strip().splitlines()[-1])
    assert seen["quant_method"] == "compressed-tensors" and seen["format"] == "int-quantized"
    assert seen["compressor_format"] == "int-quantized"
    assert seen["weights"] == {"strategy": "channel", "num_bits": 8}
    assert seen["input_activations"] == {"strategy": "token", "dynamic": True}
    assert seen["quantized_modules"] == 14  # 2 layers x (q, k, v, o, gate, up, down); lm_head ignored
    assert seen["weight_max_abs_diff"] == 0.0  # the library's decompression is our int8 x scale, exactly
    # its own model's logits (its activation quantization, not ours) and the reference forward's
    assert seen["logits_cosine_min"] > 0.999, seen


def test_the_checkpoint_meets_the_w8a8_row(quant_python: Path, model_dir: Path, checkpoint: Path) -> None:
    code, report, stderr = evaluate(quant_python, model_dir, checkpoint)
    assert code == 0 and report is not None, stderr[-2000:]
    assert report["scheme"] == "CT_W8A8" and report["verdict"]["passed"]
    assert report["verdict"]["row"]["cosine_min"] == 0.99  # the W8A8_DYNAMIC row: the same numerics
    figures = report["figures"]
    assert 0.99 < figures["cosine_min"] < 1.0  # executed: the quantization changed the forward
    assert figures["weight_bytes_quantized"] < figures["weight_bytes_reference"]


@pytest.mark.parametrize(
    ("edit", "code", "message"),
    [("scale", 1, ""), ("float", 2, "expected torch.int8"), ("static", 2, "input_activations")],
)
def test_a_doctored_checkpoint_fails_or_is_refused(
    quant_python: Path, model_dir: Path, checkpoint: Path, tmp_path: Path, edit: str, code: int, message: str
) -> None:
    doctored = tmp_path / edit
    run([quant_python, HERE / "doctor_checkpoint.py", checkpoint, doctored, edit])
    found, report, stderr = evaluate(quant_python, model_dir, doctored)
    assert found == code, stderr[-2000:]
    if code == 1:
        assert report is not None and not report["verdict"]["passed"]
    else:
        assert message in stderr and "refused" in stderr
