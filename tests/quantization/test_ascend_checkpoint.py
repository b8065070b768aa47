"""msModelSlim's own CLI quantizes a real (random-weight) causal LM on this CPU, and the checkpoint
it saves is executed by reference (ab_runtime.quant): figures within the scheme's standard for the
honest checkpoint, refused or failed for a doctored one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.quantization.quant_support import HERE, evaluate, run

SCHEMES = {"W8A8_DYNAMIC": "default-w8a8.yaml", "W8A16": "default-w8a16.yaml"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def checkpoints(quant_python: Path, model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One checkpoint per scheme, made by `msmodelslim quant` with its shipped default practice."""
    practices = Path(
        run([quant_python, "-c", "import msmodelslim, os; print(os.path.dirname(msmodelslim.__file__))"]).strip()
    )
    out = tmp_path_factory.mktemp("quantized")
    made = {}
    for scheme, practice in SCHEMES.items():
        save = out / scheme
        run(
            [quant_python.parent / "msmodelslim", "quant", "--model_path", model_dir, "--save_path", save,
             "--device", "cpu", "--model_type", "Llama", "--config_path", practices / "lab_practice" / "default" / practice],
            timeout=900,
        )  # fmt: skip
        made[scheme] = save
    return made


@pytest.fixture(scope="module")
def reports(quant_python: Path, model_dir: Path, checkpoints: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """Each honest checkpoint's evaluation, once."""
    out = {}
    for scheme, checkpoint in checkpoints.items():
        code, report, stderr = evaluate(quant_python, model_dir, checkpoint)
        assert code == 0 and report is not None, stderr[-2000:]
        out[scheme] = report
    return out


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_tool_checkpoint_meets_its_standard(
    checkpoints: dict[str, Path], reports: dict[str, dict[str, Any]], scheme: str
) -> None:
    description = json.loads((checkpoints[scheme] / "quant_model_description.json").read_text())
    assert description["model_quant_type"] == scheme
    assert description["model.layers.0.mlp.down_proj.weight"] == scheme
    report = reports[scheme]
    assert report["verdict"]["passed"] and report["scheme"] == scheme
    figures = report["figures"]
    assert figures["cosine_min"] < 1.0  # the quantization did change the forward: it was executed
    assert figures["weight_bytes_quantized"] < figures["weight_bytes_reference"]


def test_stricter_standard_for_weight_only(reports: dict[str, dict[str, Any]]) -> None:
    rows = {scheme: report["verdict"]["row"] for scheme, report in reports.items()}
    assert rows["W8A16"]["cosine_min"] > rows["W8A8_DYNAMIC"]["cosine_min"]
    assert rows["W8A16"]["max_abs_err_scaled_max"] < rows["W8A8_DYNAMIC"]["max_abs_err_scaled_max"]
    # weight-only quantization is the closer of the two on the same model and inputs
    assert reports["W8A16"]["figures"]["cosine_min"] > reports["W8A8_DYNAMIC"]["figures"]["cosine_min"]


@pytest.mark.parametrize(("how", "expected"), [("scale", 1), ("swap", 1), ("float", 2)])
def test_doctored_checkpoint_is_refused_or_fails(
    quant_python: Path, model_dir: Path, checkpoints: dict[str, Path], tmp_path: Path, how: str, expected: int
) -> None:
    doctored = tmp_path / how
    run([quant_python, HERE / "doctor_checkpoint.py", checkpoints["W8A8_DYNAMIC"], doctored, how])
    code, report, stderr = evaluate(quant_python, model_dir, doctored)
    assert code == expected, stderr[-2000:]
    if expected == 2:
        assert "expected torch.int8" in stderr
    else:
        assert report is not None and not report["verdict"]["passed"]


def test_description_naming_a_missing_tensor_is_refused(
    quant_python: Path, model_dir: Path, checkpoints: dict[str, Path], tmp_path: Path
) -> None:
    doctored = tmp_path / "described"
    shutil.copytree(checkpoints["W8A16"], doctored)
    path = doctored / "quant_model_description.json"
    description = json.loads(path.read_text())
    description["model.layers.9.mlp.up_proj.weight"] = "W8A16"
    path.write_text(json.dumps(description))
    code, _, stderr = evaluate(quant_python, model_dir, doctored)
    assert code == 2 and "described but not saved: model.layers.9.mlp.up_proj.weight" in stderr
