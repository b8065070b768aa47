"""Both gates on real evidence: pass on an honest run; fail on tampered notes, on tampered perf
evidence, and on a forged speedup that a fresh paired measurement does not reproduce, idle or
beside busy loops (honest evidence there is passed or inconclusive, never failed). Passes of
known cost (tests/optimization/inner/known_cost_passes.py) make the speed outcomes certain."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ab_runtime.metrics_file import find_metrics
from ab_runtime.optimize.notes_file import NOTES_FILE
from bench.busy_loops import busy_loops
from optimization.gate import OptimizationGateReport, check_notes_gate, check_perf_gate
from optimization.notes_check import check_notes, pairstats
from tests.optimization.opt_support import finish, run_py

SCRIPTS = Path(__file__).resolve().parents[2] / "optimization" / "scripts"
KNOWN_COST = Path(__file__).resolve().parent / "inner" / "known_cost_passes.py"


@pytest.fixture()
def known_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test-only passes, visible to every process these tests start (runs, gates, re-measurements)."""
    monkeypatch.setenv("AB_RUNTIME_EXTRA_PASSES", str(KNOWN_COST))


def select(notes: dict[str, Any], name: str, kind: str, base_ms: float, cand_ms: float) -> dict[str, Any]:
    """Notes whose search (consistently) measured and selected `name` at base_ms -> cand_ms."""
    blocks = [[base_ms, base_ms + i] for i in range(5)], [[cand_ms, cand_ms + i / 100] for i in range(5)]
    paired = pairstats().summarize_pairs(*blocks, warmup=notes["settings"]["warmup"]).as_dict()
    row = {
        "name": name,
        "passes": [name],
        "kind": kind,
        "group": None,
        "changes_code": False,
        "applicable": True,
        "measured": True,
        "kept": True,
        "reason": "forged",
        "paired": paired,
        "accuracy": {"verdict": "pass", "target_dtype": "float32"},
        "cold_start": {"build_s": 0.1, "first_call_ms": 1.0},
    }
    notes["passes"].append(row)
    notes["settings"]["iters_per_block"] = 2
    notes["selection"] = {
        "passes": [name],
        "outcome": "gain",
        "speedup": paired["speedup"],
        "baseline_median_ms": paired["baseline_median_ms"],
        "optimized_median_ms": paired["candidate_median_ms"],
        "interval": paired["interval"],
        "accuracy": row["accuracy"],
        "cold_start": row["cold_start"],
    }
    return notes


@pytest.fixture(scope="module")
def honest(searches: dict, python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("gates") / "strict-llama"
    shutil.copytree(searches["strict"][0], directory, symlinks=True)
    finish(python, directory, [])
    return directory


def test_honest_no_gain_passes_both_gates(honest: Path) -> None:
    notes_report = check_notes_gate(honest)
    assert notes_report.passed, notes_report.problems
    perf = subprocess.run(
        [sys.executable, str(SCRIPTS / "check_accuracy_run_perf.py"), "--adaptation-dir", str(honest)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert perf.returncode == 0 and "PASS: no gain claimed" in perf.stdout, perf.stdout + perf.stderr
    # Run by hand, it re-measures where the perf run timed (its recorded cores and threads) and says so.
    assert perf.stdout.startswith("placement: pinned to cores ") and "as the run recorded" in perf.stdout, perf.stdout


def test_tampered_notes_fail_the_notes_gate(honest: Path, searches: dict, tmp_path: Path) -> None:
    """A flattering latency in a timed row. The strict search times none (each pass fails accuracy,
    so none is timed): the row comes from the llama search's notes, whose cpu_threads_1 is always timed."""
    directory = tmp_path / "t"
    shutil.copytree(honest, directory, symlinks=True)
    notes = json.loads((directory / NOTES_FILE).read_text())
    timed = json.loads((searches["llama"][0] / NOTES_FILE).read_text())
    measured = copy.deepcopy(next(r for r in timed["passes"] if r.get("paired") and not r["kept"]))
    assert check_notes({**notes, "passes": [*notes["passes"], measured]}) == []  # honest as it stands
    measured["paired"]["candidate_median_ms"] /= 3  # a flattering latency
    notes["passes"].append(measured)
    (directory / NOTES_FILE).write_text(json.dumps(notes))
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / "check_optimization_notes.py"), "--adaptation-dir", str(directory)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and "candidate_median_ms" in run.stdout


def test_tampered_perf_accuracy_fails_the_perf_gate(honest: Path, tmp_path: Path) -> None:
    directory = tmp_path / "t"
    shutil.copytree(honest, directory, symlinks=True)
    notes = json.loads((directory / NOTES_FILE).read_text())
    path = directory / notes["perf_run"]["metrics"]
    metrics = json.loads(path.read_text())
    for out in metrics["accuracy"]["outputs"].values():
        if "max_abs_err" in out["metrics"]:
            out["metrics"]["max_abs_err"] += 0.125  # any figure the saved outputs do not give
    path.write_text(json.dumps(metrics))
    report = check_perf_gate(directory)
    assert not report.passed and "do not match the figures recomputed" in report.summary


def test_a_claimed_gain_the_confirmation_run_does_not_reproduce_ends_no_gain(
    honest: Path, python: Path, tmp_path: Path, known_cost: None
) -> None:
    """The search 'measured' x1.30 for a pass that really doubles the work: the fresh confirmation
    run re-measures it, the outcome is no_gain with the baseline kept, and the notes stay valid."""
    directory = tmp_path / "curse"
    shutil.copytree(honest, directory, symlinks=True)
    notes = select(json.loads((directory / NOTES_FILE).read_text()), "test_twice", "compile", 13.0, 10.0)
    assert 1.25 < notes["selection"]["speedup"] < 1.35
    (directory / NOTES_FILE).write_text(json.dumps(notes))
    code, result, output = run_py(python, directory, "-m", "ab_runtime.optimize.confirm", "--device", "cpu")
    assert code == 0 and result["ok"], output[-3000:]
    notes = json.loads((directory / NOTES_FILE).read_text())
    final = notes["final"]
    assert final["outcome"] == "no_gain" and notes["chosen"] == [] and final["speedup"] == 1.0
    assert final["selection_speedup"] == pytest.approx(notes["selection"]["speedup"])
    # The decision rests on the interval's low end, which the load cannot lift over the bar; the
    # median can: beside busy loops plus the whole suite it once read x32.96 for this doubled
    # forward (most blocks' baseline calls preempted), and the pairs at or under the bar still
    # rejected the pass, as they should. Idle and beside the loops alone it reads about x0.5.
    assert final["confirmed_interval"][0] <= 1.0 + notes["settings"]["min_gain"], final
    assert "did not reproduce" in final["reason"]
    assert notes["confirmation"]["measured"] and notes["confirmation"]["passes"] == ["test_twice"]
    assert check_notes(notes) == []


def test_a_slower_configuration_fails_the_perf_gate(
    honest: Path, python: Path, tmp_path: Path, known_cost: None
) -> None:
    """Consistent notes claiming x1.30 for a pass that doubles the work: the gate's own paired
    re-measurement must clear 1 + min_gain, so the slowdown fails (a 0.5 tolerance let it pass)."""
    directory = tmp_path / "slower"
    shutil.copytree(honest, directory, symlinks=True)
    notes = select(json.loads((directory / NOTES_FILE).read_text()), "test_twice", "compile", 13.0, 10.0)
    fresh = (
        pairstats()
        .summarize_pairs(
            [[13.0, 13.0 + i] for i in range(5)],
            [[10.0, 10.0 + i / 100] for i in range(5)],
            warmup=notes["settings"]["warmup"],
        )
        .as_dict()
    )
    notes["confirmation"] = {
        "measured": True,
        "passes": ["test_twice"],
        "process": "fresh",
        "max_pairs": 5,
        "paired": fresh,
    }
    notes["final"] = pairstats().confirmed_final(notes["selection"], fresh, {"test_twice": "compile"}, 0.02)
    notes["chosen"] = notes["final"]["passes"]
    (directory / NOTES_FILE).write_text(json.dumps(notes))
    finish(python, directory, ["test_twice"])
    assert check_notes_gate(directory).passed, check_notes_gate(directory).problems
    # Six calls a block (not two): the suite's other worker runs model searches at the same time, and
    # two calls a block once measured the doubled forward x2.89 "faster" (the gate still failed it).
    report = check_perf_gate(directory, iters=6)
    # Which of the two failing rules fires depends on the pairs' upper end: below x0.93 the claimed x1.30
    # is implausible ("not a figure of this configuration"), at x0.93..x1.02 it simply does not reproduce.
    reasons = ("not a figure of this configuration", "speedup does not reproduce")
    assert report.verdict == "failed" and any(r in report.summary for r in reasons), report.as_dict()
    # Some pair measured the doubled forward slower; the medians' ratio is the load's to set (x0.99
    # over 8 pairs on a 2-core host running the suite beside another test run, 2026-12-07).
    assert min(report.details["reproduced"]["pair_speedups"]) < 1.0, report.details["reproduced"]


def forged(honest: Path, python: Path, directory: Path, name: str, base_ms: float, cand_ms: float) -> Path:
    """A copy of `honest` whose notes claim, consistently (search row, selection, confirmation,
    final), `name` at base_ms -> cand_ms, with real perf evidence of `name`: the notes gate passes."""
    shutil.copytree(honest, directory, symlinks=True)
    notes = select(json.loads((directory / NOTES_FILE).read_text()), name, "compile", base_ms, cand_ms)
    fresh = dict(notes["passes"][-1]["paired"])
    notes["confirmation"] = {"measured": True, "passes": [name], "process": "fresh", "max_pairs": 5, "paired": fresh}
    notes["final"] = pairstats().confirmed_final(notes["selection"], fresh, {name: "compile"}, 0.02)
    notes["chosen"] = notes["final"]["passes"]
    (directory / NOTES_FILE).write_text(json.dumps(notes))
    finish(python, directory, [name])
    assert check_notes_gate(directory).passed, check_notes_gate(directory).problems
    return directory


def test_evidence_that_does_not_recompute_is_never_re_measured(
    honest: Path, python: Path, tmp_path: Path, known_cost: None
) -> None:
    """The perf gate recomputes the perf evidence and re-measures in one process (one compile of
    the chosen configuration); outputs changed after the run fail there, and no pair is taken."""
    directory = forged(honest, python, tmp_path / "changed", "test_same", 20.0, 10.0)
    notes = json.loads((directory / NOTES_FILE).read_text())
    assert notes["chosen"] == ["test_same"]  # a claim, so the one-process path
    metrics = json.loads((directory / notes["perf_run"]["metrics"]).read_text())
    outputs = directory / metrics["evidence"]["outputs"]
    outputs.write_bytes(outputs.read_bytes() + b"\0")
    report = check_perf_gate(directory)
    assert not report.passed and "sha256 does not match the metrics file" in report.summary, report.as_dict()
    assert "reproduced" not in report.details  # the pairs were never taken


def measured(report: OptimizationGateReport) -> str:
    """A perf gate report in one short line: its verdict and its re-measurement's pairs and load counts."""
    again = report.details.get("reproduced") or {}
    pairs = [round(x, 3) for x in again.get("pair_speedups", [])]
    aside = [round(x, 3) for x in again.get("set_aside_pair_speedups", [])]
    counts = {k: again.get(k) for k in ("retaken_blocks", "unclean_blocks", "uneven_blocks")}
    return f"{report.verdict}: pairs {pairs}, set aside {aside}, {counts}; {report.summary[-240:]}"


@pytest.mark.slow  # three paired re-measurements, two of them beside busy loops
def test_load_never_flips_the_perf_gate(honest: Path, python: Path, tmp_path: Path, known_cost: None) -> None:
    """A forged x2 speedup (a pass of no gain claimed at 20 -> 10 ms) never passes, on the host as it
    is and beside two CPU and two memory-copy loops: failed, or inconclusive where the pairs spread
    too wide to decide (CI measured 0.076..15.288 beside the loops, and 0.881..1.798 without them on
    a host loaded by other jobs); honest evidence of a real gain beside the same loops is passed or
    inconclusive, never failed. That a forged claim fails is `test_a_slower_configuration_fails_the_perf_gate`
    and the rule's own test (test_optimization_stats.py)."""
    fake = forged(honest, python, tmp_path / "forged", "test_same", 20.0, 10.0)
    assert json.loads((fake / NOTES_FILE).read_text())["final"]["speedup"] == pytest.approx(2.0)
    idle = check_perf_gate(fake)
    with busy_loops(2, 2):
        loaded = check_perf_gate(fake)
    for condition, report in (("idle", idle), ("beside the loops", loaded)):
        print(condition, measured(report))  # shown whole when the test fails (an assertion message is cut)
        assert report.verdict in ("failed", "inconclusive"), (condition, measured(report))

    directory = tmp_path / "honest-gain"
    shutil.copytree(honest, directory, symlinks=True)
    notes = json.loads((directory / NOTES_FILE).read_text())
    notes["chosen"] = ["test_cached_outputs"]
    (directory / NOTES_FILE).write_text(json.dumps(notes))
    result = finish(python, directory, ["test_cached_outputs"])
    notes = json.loads((directory / NOTES_FILE).read_text())
    notes["final"] = {"passes": notes["chosen"], "outcome": "gain", "speedup": result["speedup"]}  # as measured
    (directory / NOTES_FILE).write_text(json.dumps(notes))
    with busy_loops(2, 2):
        report = check_perf_gate(directory)
    print("honest gain beside the loops", measured(report))
    assert report.verdict in ("passed", "inconclusive"), measured(report)


def test_an_int8_winner_passes_the_perf_gate_by_re_execution(
    honest: Path, python: Path, tmp_path: Path, known_cost: None
) -> None:
    """int8 outputs are only reproduced when re-execution applies the chosen passes (the plain
    model's outputs differ); cached outputs on top make the speed check certain."""
    directory = tmp_path / "int8"
    shutil.copytree(honest, directory, symlinks=True)
    spec = json.loads((directory / "adaptation.json").read_text())
    spec.pop("tolerances", None)  # the strict fixture tolerances reject int8 accuracy; speed is what is tested
    (directory / "adaptation.json").write_text(json.dumps(spec, indent=2))
    notes = json.loads((directory / NOTES_FILE).read_text())
    chosen = ["cpu_int8_dynamic", "test_cached_outputs"]
    notes["chosen"] = chosen
    (directory / NOTES_FILE).write_text(json.dumps(notes))
    result = finish(python, directory, chosen)
    notes = json.loads((directory / NOTES_FILE).read_text())
    notes["final"] = {"passes": chosen, "outcome": "gain", "speedup": result["speedup"]}  # the claim, as measured
    (directory / NOTES_FILE).write_text(json.dumps(notes))
    assert result["dtype"] == "bfloat16"  # int8 is judged by the comparator's bf16 standard here
    report = check_perf_gate(directory, iters=2)
    assert report.passed, report.as_dict()
    assert report.details["reproduced"]["interval"][0] > 1.02
    assert result["metrics"].startswith("perf_metrics_")  # never taken by the benchmark gate's glob
    assert all(not ev.data.get("optimization") for ev in find_metrics(directory))


def test_perf_gate_usage_errors() -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / "check_accuracy_run_perf.py"), "--adapt", "no such"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and run.stderr.startswith("error: ") and "Traceback" not in run.stderr
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / "check_accuracy_run_perf.py"), "--adaptation-dir", ".", "--pairs", "3"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "--pairs must be >= 5" in run.stderr
