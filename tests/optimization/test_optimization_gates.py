"""Both gates on real evidence: pass on an honest run; fail on tampered notes, on tampered perf
evidence, and on a forged speedup that a fresh paired measurement does not reproduce."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from adaptation.spec import AdaptationSpec
from optimization.gate import accuracy_summary, check_notes_gate, check_perf_gate
from optimization.notes_check import NOTES_FILE, pairstats
from optimization.render import render_accuracy_run_perf
from tests.optimization.opt_support import run_py

SCRIPTS = Path(__file__).resolve().parents[2] / "optimization" / "scripts"


def finish(python: Path, directory: Path, chosen: list[str]) -> dict[str, Any]:
    """What the stage does after the search: render, run accuracy_run_perf.py, record it in the notes."""
    render_accuracy_run_perf(AdaptationSpec.load(directory), directory, chosen, "cpu")
    code, result, output = run_py(python, directory, "accuracy_run_perf.py", "--device", "cpu", "--iters", "2")
    assert code == 0 and result["ok"], output[-3000:]
    notes = json.loads((directory / NOTES_FILE).read_text())
    metrics = json.loads((directory / result["metrics"]).read_text())
    notes["perf_run"] = {"metrics": result["metrics"], "outputs": result["outputs"], "trace": result["trace"],
                         "speedup": result["speedup"], "interval": result["interval"],
                         "accuracy": accuracy_summary(metrics["accuracy"])}
    (directory / NOTES_FILE).write_text(json.dumps(notes))
    return result


@pytest.fixture(scope="module")
def honest(searches: dict, python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("gates") / "strict-llama"
    shutil.copytree(searches["strict"][0], directory, symlinks=True)
    finish(python, directory, [])
    return directory


def test_honest_no_gain_passes_both_gates(honest: Path) -> None:
    notes_report = check_notes_gate(honest)
    assert notes_report.passed, notes_report.problems
    perf = subprocess.run([sys.executable, str(SCRIPTS / "check_accuracy_run_perf.py"), "--adaptation-dir", str(honest)],
                          capture_output=True, text=True, timeout=900)
    assert perf.returncode == 0 and "PASS: no gain claimed" in perf.stdout, perf.stdout + perf.stderr


def test_tampered_notes_fail_the_notes_gate(honest: Path, tmp_path: Path) -> None:
    directory = tmp_path / "t"
    shutil.copytree(honest, directory, symlinks=True)
    notes = json.loads((directory / NOTES_FILE).read_text())
    measured = next(r for r in notes["passes"] if r.get("paired"))  # the first measured pass, whatever the CPU
    measured["paired"]["candidate_median_ms"] /= 3  # a flattering latency
    (directory / NOTES_FILE).write_text(json.dumps(notes))
    run = subprocess.run([sys.executable, str(SCRIPTS / "check_optimization_notes.py"), "--adaptation-dir", str(directory)],
                         capture_output=True, text=True)
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


def test_a_forged_speedup_does_not_reproduce(honest: Path, python: Path, tmp_path: Path) -> None:
    """Notes that claim x50 for bf16 and are internally consistent: only re-measuring exposes them."""
    directory = tmp_path / "forged"
    shutil.copytree(honest, directory, symlinks=True)
    notes = json.loads((directory / NOTES_FILE).read_text())
    row = next(r for r in notes["passes"] if r["name"] == "cpu_bf16_cast")
    blocks = [[50.0 + i, 51.0] for i in range(5)], [[1.0, 1.0 + i / 100] for i in range(5)]
    row["paired"] = pairstats().summarize_pairs(*blocks, warmup=notes["settings"]["warmup"]).as_dict()
    row["accuracy"] = {"verdict": "pass", "target_dtype": "bfloat16"}
    row.update(measured=True, kept=True, reason="forged", cold_start={"build_s": 0.1, "first_call_ms": 1.0})
    notes["settings"]["iters_per_block"] = 2
    p = row["paired"]
    notes["chosen"] = ["cpu_bf16_cast"]
    notes["final"] = {"passes": ["cpu_bf16_cast"], "outcome": "gain", "speedup": p["speedup"],
                      "baseline_median_ms": p["baseline_median_ms"], "optimized_median_ms": p["candidate_median_ms"],
                      "interval": p["interval"], "accuracy": row["accuracy"], "cold_start": row["cold_start"]}
    (directory / NOTES_FILE).write_text(json.dumps(notes))
    # relax the spec back to defaults so the bf16 perf run itself passes accuracy: only the speed is forged
    spec = json.loads((directory / "adaptation.json").read_text())
    spec.pop("tolerances", None)
    (directory / "adaptation.json").write_text(json.dumps(spec, indent=2))
    finish(python, directory, ["cpu_bf16_cast"])
    assert check_notes_gate(directory).passed, check_notes_gate(directory).problems
    report = check_perf_gate(directory, pairs=5, iters=2)
    assert not report.passed and "speedup does not reproduce" in report.summary, report.as_dict()
    assert report.details["reproduced"]["speedup"] < 25


def test_perf_gate_usage_errors() -> None:
    run = subprocess.run([sys.executable, str(SCRIPTS / "check_accuracy_run_perf.py"), "--adapt", "no such"],
                         capture_output=True, text=True)
    assert run.returncode == 2 and run.stderr.startswith("error: ") and "Traceback" not in run.stderr
    run = subprocess.run([sys.executable, str(SCRIPTS / "check_accuracy_run_perf.py"), "--adaptation-dir", ".",
                          "--tolerance", "2"], capture_output=True, text=True)
    assert run.returncode == 2 and "--tolerance" in run.stderr
