"""check_optimization_notes: a consistent notes document passes; every kind of tampering fails."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from optimization.notes_check import NOTES_SCHEMA, check_notes, pairstats

SCRIPT = Path(__file__).resolve().parents[2] / "optimization" / "scripts" / "check_optimization_notes.py"
SETTINGS = {"pairs": 5, "iters_per_block": 2, "warmup": 2, "min_gain": 0.02, "profiler_during_timing": False}


def row(name: str, base: float, cand: float, verdict: str = "pass", changes_code: bool = False) -> dict[str, Any]:
    blocks_b = [[base + i * 0.1, base + 1.0] for i in range(5)]
    blocks_c = [[cand + i * 0.05, cand + 1.0] for i in range(5)]
    figures = pairstats().summarize_pairs(blocks_b, blocks_c, warmup=2).as_dict()
    keep, reason = pairstats().gain_decision(figures, verdict, 0.02)
    return {"name": name, "passes": [name], "kind": "precision", "group": name, "changes_code": changes_code,
            "applicable": True, "measured": True, "kept": keep, "reason": reason, "paired": figures,
            "accuracy": {"verdict": verdict}, "cold_start": {"build_s": 0.1, "first_call_ms": 5.0}}


def notes() -> dict[str, Any]:
    fast, noisy = row("cpu_bf16_cast", 10.0, 4.0), row("cpu_int8_dynamic", 10.0, 10.0)
    p = fast["paired"]
    return {"schema": NOTES_SCHEMA, "model_id": "demo/x", "adaptation": "x", "device": "cpu", "settings": SETTINGS,
            "baseline": {"dtype": "float32"}, "traits": {}, "passes": [fast, noisy,
            {"name": "cpu_channels_last", "passes": ["cpu_channels_last"], "measured": False, "kept": False,
             "applicable": False, "reason": "not applicable: model has no convolution layers"}],
            "combination": [], "chosen": ["cpu_bf16_cast"],
            "final": {"passes": ["cpu_bf16_cast"], "outcome": "gain", "speedup": p["speedup"],
                      "baseline_median_ms": p["baseline_median_ms"], "optimized_median_ms": p["candidate_median_ms"]},
            "runtime_only": True, "environment": {"torch": "2.13.0", "python": "3.11", "device_name": "cpu"}}


def test_consistent_notes_pass() -> None:
    assert check_notes(notes(), rendered=["cpu_bf16_cast"]) == []


def tamper(path: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(notes())
    target: Any = doc
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    last = keys[-1]
    target[int(last) if isinstance(target, list) else last] = value(target[int(last) if isinstance(target, list) else last]) if callable(value) else value
    return doc


@pytest.mark.parametrize("path, value, expected", [
    ("final.speedup", lambda v: v * 1.5, "not one of the measured rows"),
    ("passes.0.paired.speedup", lambda v: v * 1.5, "paired.speedup"),
    ("passes.0.paired.baseline_median_ms", lambda v: v * 2, "paired.baseline_median_ms"),
    ("passes.0.paired.warmup", 0, "warmup must be symmetric"),
    ("passes.1.kept", True, "kept=True but the figures"),
    ("passes.2.kept", True, "kept without being measured"),
    ("passes.0.paired.pairs", 3, "at least 5"),
    ("runtime_only", False, "runtime_only"),
    ("chosen", [], "final.passes"),
    ("settings.profiler_during_timing", True, "profiler_during_timing"),
    ("schema", "other/1", "schema"),
])
def test_tampered_notes_fail(path: str, value: Any, expected: str) -> None:
    problems = check_notes(tamper(path, value), rendered=["cpu_bf16_cast"])
    assert problems and any(expected in p for p in problems), problems


def test_render_mismatch_and_hidden_gain_fail() -> None:
    assert any("accuracy_run_perf.py applies" in p for p in check_notes(notes(), rendered=[]))
    doc = notes()
    doc["chosen"], doc["final"] = [], {"passes": [], "outcome": "no_gain", "speedup": 1.0}
    assert any("no gain reported although" in p for p in check_notes(doc, rendered=[]))


def test_cli_exit_codes(tmp_path: Path) -> None:
    bad = subprocess.run([sys.executable, str(SCRIPT), "--adapt", "../etc"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "Traceback" not in bad.stderr
    (tmp_path / "optimization_notes.json").write_text(json.dumps(notes()))
    (tmp_path / "accuracy_run_perf.py").write_text('PASSES = ["cpu_bf16_cast"]\n')
    ok = subprocess.run([sys.executable, str(SCRIPT), "--adaptation-dir", str(tmp_path)], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.startswith("PASS"), ok.stdout + ok.stderr
    (tmp_path / "optimization_notes.json").write_text("{not json")
    broken = subprocess.run([sys.executable, str(SCRIPT), "--adaptation-dir", str(tmp_path)], capture_output=True, text=True)
    assert broken.returncode == 1 and "not valid JSON" in broken.stdout and "Traceback" not in broken.stderr


def test_optimization_tool_aggregate_and_compare(tmp_path: Path) -> None:
    import os

    tool = SCRIPT.parent / "optimization_tool.py"
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        doc = notes()
        doc["adaptation"] = name
        (tmp_path / name / "optimization_notes.json").write_text(json.dumps(doc))
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "optimization_notes.json").write_text("[]")
    env = dict(os.environ, ASCENDBRIDGE_ADAPTATIONS=str(tmp_path))
    agg = subprocess.run([sys.executable, str(tool), "aggregate", "--out-dir", str(tmp_path / "r"),
                          "--figures-dir", str(tmp_path / "f")], capture_output=True, text=True, env=env)
    assert agg.returncode == 0, agg.stderr
    assert "2 optimized model(s)" in agg.stdout and "1 skipped" in agg.stdout
    summary = json.loads((tmp_path / "r" / "optimization_summary.json").read_text())
    assert [m["chosen"] for m in summary["models"]] == ["cpu_bf16_cast", "cpu_bf16_cast"]
    assert (tmp_path / "f" / "optimization_speedup.png").stat().st_size > 1000
    cmp_ = subprocess.run([sys.executable, str(tool), "compare", "a", "b", "--json"], capture_output=True, text=True, env=env)
    assert cmp_.returncode == 0 and json.loads(cmp_.stdout)["passes"]["cpu_bf16_cast"]["a"]["kept"] is True
    bad = subprocess.run([sys.executable, str(tool), "compare", "a", "c"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "Traceback" not in bad.stderr
