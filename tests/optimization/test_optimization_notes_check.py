"""check_optimization_notes: a consistent notes document passes; every kind of tampering fails."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ab_runtime.metrics_file import EvidenceError
from ab_runtime.optimize.notes_file import NOTES_FILE, NOTES_SCHEMA, read_notes
from ab_runtime.optimize.quick import CONFIRM_MAX_PAIRS, decide
from ascendbridge.package.spec import AdaptationSpec
from optimization.notes_check import check_notes, pairstats
from optimization.render import render_accuracy_run_perf
from tests.optimization.opt_support import demo_config, make_adaptation

SCRIPT = Path(__file__).resolve().parents[2] / "optimization" / "scripts" / "check_optimization_notes.py"
SETTINGS = {"pairs": 5, "iters_per_block": 2, "warmup": 2, "min_gain": 0.02, "profiler_during_timing": False}


def row(name: str, base: float, cand: float, verdict: str = "pass", changes_code: bool = False) -> dict[str, Any]:
    """A search row measured as the quick search does: stopped at the first pair that decides."""
    figures = as_decided(base, cand, 5)
    keep, reason = pairstats().gain_decision(figures, verdict, 0.02)
    return {
        "name": name,
        "passes": [name],
        "kind": "precision",
        "group": name,
        "changes_code": changes_code,
        "applicable": True,
        "measured": True,
        "kept": keep,
        "reason": reason,
        "paired": figures,
        "accuracy": {"verdict": verdict},
        "cold_start": {"build_s": 0.1, "first_call_ms": 5.0},
    }


def blocks(base: float, cand: float, n: int = 5) -> tuple[list[list[float]], list[list[float]]]:
    return [[base + i % 5 * 0.1, base + 1.0] for i in range(n)], [[cand + i % 5 * 0.05, cand + 1.0] for i in range(n)]


def as_decided(base: float, cand: float, max_pairs: int) -> dict[str, Any]:
    """Paired figures of `blocks`, taken one pair at a time until quick.decide decides (at most `max_pairs`)."""
    blocks_b, blocks_c = blocks(base, cand, max_pairs)
    n = next(
        i
        for i in range(1, max_pairs + 1)
        if decide([min(b) / min(c) for b, c in zip(blocks_b[:i], blocks_c[:i])], 0.02, max_pairs) != "continue"
    )
    return pairstats().summarize_pairs(blocks_b[:n], blocks_c[:n], warmup=2).as_dict()


def notes(confirmed_ms: float = 5.0) -> dict[str, Any]:
    """The search selected cpu_bf16_cast at 10 -> 4 ms; a fresh run measured 10 -> `confirmed_ms`."""
    fast, noisy = row("cpu_bf16_cast", 10.0, 4.0), row("cpu_int8_dynamic", 10.0, 10.0)
    p = fast["paired"]
    selection = {
        "passes": ["cpu_bf16_cast"],
        "outcome": "gain",
        "speedup": p["speedup"],
        "baseline_median_ms": p["baseline_median_ms"],
        "optimized_median_ms": p["candidate_median_ms"],
        "interval": p["interval"],
        "accuracy": fast["accuracy"],
        "cold_start": fast["cold_start"],
    }
    fresh = as_decided(10.0, confirmed_ms, CONFIRM_MAX_PAIRS)
    final = pairstats().confirmed_final(selection, fresh, {"cpu_bf16_cast": "precision"}, 0.02)
    return {
        "schema": NOTES_SCHEMA,
        "model_id": "demo/x",
        "adaptation": "x",
        "device": "cpu",
        "settings": SETTINGS,
        "baseline": {"dtype": "float32"},
        "traits": {},
        "passes": [
            fast,
            noisy,
            {
                "name": "cpu_channels_last",
                "passes": ["cpu_channels_last"],
                "measured": False,
                "kept": False,
                "applicable": False,
                "reason": "not applicable: model has no convolution layers",
            },
        ],
        "combination": [],
        "selection": selection,
        "confirmation": {
            "measured": True,
            "passes": ["cpu_bf16_cast"],
            "process": "fresh",
            "max_pairs": CONFIRM_MAX_PAIRS,
            "paired": fresh,
        },
        "chosen": final["passes"],
        "final": final,
        "runtime_only": True,
        "environment": {"torch": "2.13.0", "python": "3.11", "device_name": "cpu"},
    }


def test_consistent_notes_pass() -> None:
    doc = notes()
    assert check_notes(doc) == []
    assert doc["final"]["speedup"] == doc["confirmation"]["paired"]["speedup"]  # the confirmed figure is reported
    assert doc["final"]["selection_speedup"] == doc["selection"]["speedup"] > doc["final"]["speedup"]


def test_a_selection_the_confirmation_does_not_reproduce_ends_no_gain() -> None:
    """Winner's curse: the search said x2.5 (x1.30 would do), a fresh paired run measured x1.0."""
    doc = notes(confirmed_ms=10.0)
    final = doc["final"]
    assert final["outcome"] == "no_gain" and final["passes"] == [] and final["speedup"] == 1.0
    assert final["selection_speedup"] > 1.3 and final["confirmed_speedup"] == pytest.approx(1.0, abs=0.02)
    assert "did not reproduce" in final["reason"] and doc["chosen"] == []
    assert check_notes(doc) == []  # an honest, completed result
    claimed = copy.deepcopy(doc)  # claiming the selection anyway is caught
    claimed["final"] = notes()["final"]
    claimed["chosen"] = ["cpu_bf16_cast"]
    assert any("does not follow from the confirmation" in p for p in check_notes(claimed))


def test_environment_settings_are_reported_apart_from_model_changes() -> None:
    doc = notes()
    doc["passes"][0]["kind"] = "environment"  # e.g. cpu_threads_1 winning on a loaded machine
    final = pairstats().confirmed_final(
        doc["selection"], doc["confirmation"]["paired"], {"cpu_bf16_cast": "environment"}
    )
    assert final["environment_settings"] == ["cpu_bf16_cast"] and final["model_changes"] == []


def tamper(path: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(notes())
    target: Any = doc
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    last = keys[-1]
    target[int(last) if isinstance(target, list) else last] = (
        value(target[int(last) if isinstance(target, list) else last]) if callable(value) else value
    )
    return doc


@pytest.mark.parametrize(
    "path, value, expected",
    [
        ("final.speedup", lambda v: v * 1.5, "does not follow from the confirmation run"),
        ("selection.speedup", lambda v: v * 1.5, "not one of the measured rows"),
        ("confirmation.paired.speedup", lambda v: v * 1.5, "confirmation.paired.speedup"),
        ("confirmation.passes", [], "not confirmed by a fresh measurement"),
        ("passes.0.paired.speedup", lambda v: v * 1.5, "paired.speedup"),
        ("passes.0.paired.baseline_median_ms", lambda v: v * 2, "paired.baseline_median_ms"),
        ("passes.0.paired.warmup", 0, "warmup must be symmetric"),
        ("passes.1.kept", True, "kept=True but the figures"),
        ("passes.2.kept", True, "kept without being measured"),
        ("confirmation.paired.pairs", 3, "samples are not 3 pairs"),
        ("confirmation.max_pairs", 40, "confirmation.max_pairs 40 is not 5..15"),
        ("runtime_only", False, "runtime_only"),
        ("chosen", [], "chosen"),
        ("settings.profiler_during_timing", True, "profiler_during_timing"),
        ("schema", "other/1", "schema"),
    ],
)
def test_tampered_notes_fail(path: str, value: Any, expected: str) -> None:
    problems = check_notes(tamper(path, value))
    assert problems and any(expected in p for p in problems), problems


def test_a_search_row_must_stop_where_the_stopping_rule_decides() -> None:
    doc = notes()
    slow = doc["passes"][1]
    assert slow["paired"]["pairs"] == 1 and not slow["kept"]  # x1.0: the first pair rules a keep out
    slow["paired"] = pairstats().summarize_pairs(*blocks(10.0, 10.0), warmup=2).as_dict()  # measured on to 5
    assert any("not the search's stopping rule: decided after 1 pair(s) but measured 5" in p for p in check_notes(doc))


def test_the_confirmation_must_stop_where_the_stopping_rule_decides() -> None:
    """Up to quick.CONFIRM_MAX_PAIRS pairs: a no-gain confirmation stops once four pairs sit at or
    below the bar (not at the first, as five fixed pairs would), a gain once its interval clears."""
    doc = notes(confirmed_ms=10.0)
    assert doc["confirmation"]["paired"]["pairs"] == 4 and check_notes(doc) == []
    doc["confirmation"]["paired"] = pairstats().summarize_pairs(*blocks(10.0, 10.0, 6), warmup=2).as_dict()
    assert any("confirmation: not the search's stopping rule: decided after 4" in p for p in check_notes(doc))
    assert notes()["confirmation"]["paired"]["pairs"] == 5  # x2 in every pair: kept at the fifth


def test_a_search_row_sets_aside_at_most_two_unclean_pairs() -> None:
    doc = notes()
    doc["passes"][1]["paired"]["set_aside_pair_speedups"] = [0.6, 0.7]
    assert check_notes(doc) == []  # two pairs the load left unclean, not counted: allowed
    doc["passes"][1]["paired"]["set_aside_pair_speedups"] = [0.6, 0.7, 0.5]
    assert any("set_aside_pair_speedups is not a list of at most 2" in p for p in check_notes(doc))


def test_hidden_gain_fails() -> None:
    doc = notes()
    doc["selection"] = {"passes": [], "outcome": "no_gain", "speedup": 1.0}
    assert any("nothing selected although" in p for p in check_notes(doc))


@pytest.mark.slow  # real processes / a real package build
def test_cli_exit_codes(tmp_path: Path) -> None:
    bad = subprocess.run([sys.executable, str(SCRIPT), "--adapt", "../etc"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "Traceback" not in bad.stderr
    directory = make_adaptation(tmp_path, "x", demo_config("tiny-llama"), "causal_lm", "LlamaForCausalLM")
    (directory / "optimization_notes.json").write_text(json.dumps(notes()))
    render_accuracy_run_perf(AdaptationSpec.load(directory), directory, ["cpu_bf16_cast"], "cpu")
    ok = subprocess.run(
        [sys.executable, str(SCRIPT), "--adaptation-dir", str(directory)], capture_output=True, text=True
    )
    assert ok.returncode == 0 and ok.stdout.startswith("PASS"), ok.stdout + ok.stderr
    wrapper = directory / "accuracy_run_perf.py"  # a wrapper that applies other passes than the notes chose
    wrapper.write_text(wrapper.read_text().replace('["cpu_bf16_cast"]', '["cpu_int8_dynamic"]'))
    edited = subprocess.run(
        [sys.executable, str(SCRIPT), "--adaptation-dir", str(directory)], capture_output=True, text=True
    )
    assert edited.returncode == 1 and "accuracy_run_perf.py differs from what the generator renders" in edited.stdout
    (directory / "optimization_notes.json").write_text("{not json")
    broken = subprocess.run(
        [sys.executable, str(SCRIPT), "--adaptation-dir", str(directory)], capture_output=True, text=True
    )
    assert broken.returncode == 1 and "not valid JSON" in broken.stdout and "Traceback" not in broken.stderr


@pytest.mark.slow  # real processes / a real package build
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

    def run_tool(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(tool), *args], capture_output=True, text=True, env=env)

    agg = run_tool("aggregate", "--out-dir", str(tmp_path / "r"), "--figures-dir", str(tmp_path / "f"))
    assert agg.returncode == 0, agg.stderr
    assert "2 optimized model(s)" in agg.stdout and "1 skipped" in agg.stdout
    summary = json.loads((tmp_path / "r" / "optimization_summary.json").read_text())
    assert [m["chosen"] for m in summary["models"]] == ["cpu_bf16_cast", "cpu_bf16_cast"]
    assert (tmp_path / "f" / "optimization_speedup.png").stat().st_size > 1000
    cmp_ = run_tool("compare", "a", "b", "--json")
    assert cmp_.returncode == 0 and json.loads(cmp_.stdout)["passes"]["cpu_bf16_cast"]["a"]["kept"] is True
    (tmp_path / "b-with-a-name-longer-than-twenty").mkdir()
    renamed = json.loads((tmp_path / "b" / "optimization_notes.json").read_text())
    renamed["adaptation"] = "b-with-a-name-longer-than-twenty"
    (tmp_path / "b-with-a-name-longer-than-twenty" / "optimization_notes.json").write_text(json.dumps(renamed))
    text = run_tool("compare", "a", "b-with-a-name-longer-than-twenty")
    assert text.returncode == 0, text.stderr
    table = [line for line in text.stdout.splitlines() if not line.startswith("pass effects")]
    assert "b-with-a-name-longer-than-twenty" in table[0]  # whole, not cut at 20 characters
    assert len({len(line) for line in table}) == 1, text.stdout  # every row's columns aligned
    bad = run_tool("compare", "a", "c")
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "Traceback" not in bad.stderr


def test_perf_evidence_has_its_own_name_the_benchmark_gate_never_takes(tmp_path: Path) -> None:
    from ab_runtime.metrics_file import METRICS_SCHEMA, evidence_names, find_metrics
    from optimization.render import PERF_METRICS_PREFIX

    perf = evidence_names("perf", "cpu", "float32", "dry_run", "synthetic")  # what perf_run writes
    assert perf["metrics"] == "perf_metrics_cpu_float32_dry_run_synthetic.json"
    assert perf["metrics"].startswith(PERF_METRICS_PREFIX)
    (tmp_path / perf["metrics"]).write_text(json.dumps({"schema": METRICS_SCHEMA}))
    assert find_metrics(tmp_path) == []


def test_the_one_notes_reader_takes_a_whole_document_and_refuses_the_rest_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / NOTES_FILE
    path.write_text(json.dumps(notes()))
    assert read_notes(tmp_path) == read_notes(path) == notes()  # the adaptation directory or the file
    partial = {k: v for k, v in notes().items() if k != "final"}
    for text, said in (
        ("{not json", "not valid JSON (JSONDecodeError)"),
        (
            json.dumps({**notes(), "schema": "other/1"}),
            f"not an optimization notes document (schema != {NOTES_SCHEMA})",
        ),
        (json.dumps(partial), "missing: final"),
    ):
        path.write_text(text)
        with pytest.raises(EvidenceError) as refused:
            read_notes(path)
        assert str(refused.value) == f"{NOTES_FILE}: {said}"
    path.unlink()
    with pytest.raises(EvidenceError, match="not found in .*; run the optimization stage"):
        read_notes(tmp_path)
