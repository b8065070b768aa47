"""A dtype a model cannot run in is a finding: FNet's FFT refuses bfloat16 on CPU (the probe names
the module and operator, the healer's rule keeps that module in float32, the rerun passes), and
XGLM's float64 reference fails (recorded; compared against the float32 reference instead)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from adaptation.healing.failure import Failure
from adaptation.spec import AdaptationSpec
from benchmark.render import render_accuracy_run
from benchmark.stage import dtype_finding, keep_module_fp32
from tests.benchmark.bench_support import make_adaptation, run_accuracy

FAST = ("--device", "cpu", "--num-samples", "1")


@pytest.fixture(scope="module")
def first_runs(tmp_path_factory: pytest.TempPathFactory, python: Path) -> dict[str, tuple]:
    root = tmp_path_factory.mktemp("dtype-findings")
    dirs = {name: make_adaptation(root, name) for name in ("tiny-fnet", "tiny-xglm")}
    with ThreadPoolExecutor(max_workers=2) as pool:
        fnet = pool.submit(run_accuracy, python, dirs["tiny-fnet"], *FAST, "--dtype", "bfloat16")
        xglm = pool.submit(run_accuracy, python, dirs["tiny-xglm"], *FAST)
        return {"tiny-fnet": (dirs["tiny-fnet"], *fnet.result()), "tiny-xglm": (dirs["tiny-xglm"], *xglm.result())}


def test_fnet_bf16_refusal_is_located_and_the_fp32_island_remedy_makes_it_run(first_runs: dict, python: Path) -> None:
    directory, code, result, stdout, stderr = first_runs["tiny-fnet"]
    assert code == 1 and not result["ok"], stderr[-2000:]
    finding = result["finding"]
    assert finding["dtype"] == "bfloat16" and finding["device"] == "cpu"
    assert finding["module_class"] == "FNetBasicFourierTransform"
    assert finding["module"].startswith("encoder.layer.0.fourier")
    assert "fft" in finding["operator"] and "Unsupported dtype BFloat16" in finding["error"]
    assert "ASCENDBRIDGE_DTYPE_FINDING " in stdout  # the finding is its own line for people and logs

    spec = AdaptationSpec.load(directory)
    failure = Failure(phase="benchmark", exit_code=code, timed_out=False, output=stdout + stderr, result=result)
    fixed = keep_module_fp32(spec, failure)
    assert fixed is not None and fixed.dtype.keep_fp32_modules == ["FNetBasicFourierTransform"]
    assert fixed.applied_fixes[-1].rule == "dtype_unsupported"
    assert keep_module_fp32(fixed, failure) is None  # the rule never proposes the same island twice
    summary = dtype_finding(result, "no remedy left", kept=False)["summary"]
    assert "FNetBasicFourierTransform" in summary and "bfloat16 evidence set is left out" in summary

    fixed.save(directory)
    render_accuracy_run(fixed, directory)
    code, rerun, _, stderr = run_accuracy(python, directory, *FAST, "--dtype", "bfloat16")
    assert code == 0 and rerun["ok"] and rerun["verdict"] == "pass", stderr[-2000:]
    assert rerun["keep_fp32_modules"] == ["FNetBasicFourierTransform"]


def test_xglm_float64_reference_failure_is_recorded_and_fp32_comparison_goes_on(first_runs: dict) -> None:
    directory, code, result, _, stderr = first_runs["tiny-xglm"]
    assert code == 0 and result["verdict"] == "pass", stderr[-2000:]
    note = result["reference_fp64"]
    assert note.startswith("failed: RuntimeError: value cannot be converted to type float without overflow")
    assert note.endswith("compared against the float32 reference only")
