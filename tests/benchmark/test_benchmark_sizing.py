"""Sized measurements (ab_runtime/sizing.py): the asked counts while they fit the budget, fewer
timed calls (never under the floor) once one call says they would not, recorded and gated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ab_runtime import sizing
from ascendbridge.gatekit.metrics_check import check_metrics
from bench.support.tiny_adaptations import make_adaptation, run_accuracy
from benchmark.gate import check_adaptation

METRICS = "benchmark_metrics_cpu_bfloat16_dry_run_synthetic.json"


def test_counts_that_fit_the_budget_are_the_asked_ones() -> None:
    chosen = sizing.size(call_s=0.003, warmup=3, iterations=10, budget_s=60)
    assert (chosen.iterations, chosen.budget_ended) == (10, False)
    assert "fit the 60 s budget" in chosen.why


def test_a_slow_call_cuts_the_timed_calls_to_the_budget_never_under_the_floor() -> None:
    cut = sizing.size(call_s=6.0, warmup=3, iterations=10, budget_s=60)  # 78 s asked; 60 - 18 leaves 7 calls
    assert (cut.iterations, cut.warmup, cut.budget_ended) == (7, 3, True)
    assert "over the 60 s budget: 7 timed calls" in cut.why
    floor = sizing.size(call_s=30.0, warmup=3, iterations=10, budget_s=60)
    assert (floor.iterations, floor.budget_ended) == (sizing.FLOOR, True) and "the floor of 5" in floor.why
    few = sizing.size(call_s=30.0, warmup=1, iterations=3, budget_s=60)  # fewer asked than the floor: all kept
    assert (few.iterations, few.budget_ended) == (3, False)


def test_a_record_that_does_not_match_its_samples_or_breaks_the_floor_is_refused() -> None:
    record = sizing.size(call_s=30.0, warmup=3, iterations=10, budget_s=60).record()
    assert sizing.check_record("timing.sizing", record, 5, 3) == []
    assert "the samples say 4 after 3" in sizing.check_record("timing.sizing", record, 4, 3)[0]
    under = {**record, "iterations": 3, "floor": 3}
    assert any("under the floor of 5" in p for p in sizing.check_record("timing.sizing", under, 3, 3))
    silent = {**record, "budget_ended": False}
    assert any("budget_ended" in p for p in sizing.check_record("timing.sizing", silent, 5, 3))
    assert sizing.budget_line("target timing", record) == f"sized target timing: {record['why']}"
    assert sizing.budget_line("target timing", {**record, "budget_ended": False}) is None


@pytest.fixture(scope="module")
def sized_run(tmp_path_factory: pytest.TempPathFactory, python: Path) -> tuple[Path, dict, str]:
    """tiny-gpt2 (generation workload) asked for 8 timed calls with a budget no call fits."""
    directory = make_adaptation(tmp_path_factory.mktemp("sized"), "tiny-gpt2")
    code, result, stdout, stderr = run_accuracy(
        python, directory, "--device", "cpu", "--iters", "8", "--budget-s", "1e-4"
    )
    assert code == 0, stdout + stderr
    return directory, result, stdout


def test_a_budget_no_call_fits_measures_the_floor_and_says_so(sized_run: tuple[Path, dict, str]) -> None:
    directory, result, stdout = sized_run
    metrics = json.loads((directory / METRICS).read_text())
    for block in (metrics["timing"], metrics["reference_timing"], *metrics["workload"]["runs"]):
        assert block["iterations"] == sizing.FLOOR and block["sizing"]["asked_iterations"] == 8
        assert block["sizing"]["budget_ended"] is True and block["sizing"]["call_s"] > 0
    assert len(metrics["timing"]["samples_ms"]) == len(metrics["calibration"]["samples_ms"]) == sizing.FLOOR
    assert check_metrics(metrics) == []
    lines = result["budget_ended"]
    assert lines[:2] == [
        f"sized reference timing: {metrics['reference_timing']['sizing']['why']}",
        f"sized target timing: {metrics['timing']['sizing']['why']}",
    ]
    assert any(line.startswith("sized workload at batch 1: ") for line in lines)
    assert all(line in stdout for line in lines)


def test_sized_evidence_passes_the_gate_and_a_forged_floor_does_not(
    sized_run: tuple[Path, dict, str], python: Path
) -> None:
    directory = sized_run[0]
    report = check_adaptation(directory, str(python))
    assert report.passed or (report.inconclusive and report.undecided), report.as_dict()
    forged = json.loads((directory / METRICS).read_text())
    timing = forged["timing"]
    del timing["samples_ms"][3:]  # three calls, statistics and record made to agree with them
    timing.update(iterations=3, median_ms=sorted(timing["samples_ms"])[1])
    timing["sizing"].update(iterations=3, floor=3)
    assert any("under the floor of 5" in p for p in check_metrics(forged))
