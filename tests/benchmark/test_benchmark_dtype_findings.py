"""A dtype a model cannot run in is a finding: XGLM's float64 reference fails (recorded; compared
against the float32 reference instead). FNet's bfloat16 refusal and its fp32-island remedy run
through the whole benchmark stage in test_benchmark_stage.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.support.tiny_adaptations import make_adaptation, run_accuracy
from benchmark.stage import dtype_finding

FAST = ("--device", "cpu", "--num-samples", "1")


@pytest.fixture(scope="module")
def xglm_run(tmp_path_factory: pytest.TempPathFactory, python: Path) -> tuple:
    directory = make_adaptation(tmp_path_factory.mktemp("dtype-findings"), "tiny-xglm")
    return (directory, *run_accuracy(python, directory, *FAST))


def test_the_dtype_rule_states_a_finding_that_is_left_out() -> None:
    finding = {
        "dtype": "bfloat16",
        "device": "cpu",
        "module": "encoder.layer.0.fourier",
        "operator": "aten::fft_fftn",
        "module_class": "FNetBasicFourierTransform",
        "error": "RuntimeError: Unsupported dtype BFloat16",
    }
    summary = dtype_finding({"finding": finding}, "no remedy left", kept=False)["summary"]
    assert "FNetBasicFourierTransform" in summary and "bfloat16 evidence set is left out" in summary


def test_xglm_float64_reference_failure_is_recorded_and_fp32_comparison_goes_on(xglm_run: tuple) -> None:
    directory, code, result, _, stderr = xglm_run
    assert code == 0 and result["verdict"] == "pass", stderr[-2000:]
    note = result["reference_fp64"]
    assert note.startswith("failed: RuntimeError: value cannot be converted to type float without overflow")
    assert note.endswith("compared against the float32 reference only")
