"""Cheap checks of the loop and gate edges that need no model run: a package that cannot be
used at all, evidence that does not belong to the spec or device, and the output checks."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from ascendbridge.package.spec import AdaptationSpec, ModelSource
from healing.evidence import write_evidence
from healing.gate import healing_gate, outputs_problem
from healing.loop import heal
from healing.rules import FixContext
from healing.settings import HealingSettings


def spec_only_package(root: Path) -> Path:
    directory = root / "half-rendered"
    directory.mkdir()
    AdaptationSpec(
        name="half-rendered",
        model=ModelSource(model_id="org/m"),
        task_family="causal_lm",
        model_class="GPT2LMHeadModel",
    ).save(directory)
    return directory


def test_package_without_pyproject_fails_with_a_diagnosis(tmp_path: Path) -> None:
    directory = spec_only_package(tmp_path)
    log = io.StringIO()
    report = heal(directory, HealingSettings(max_attempts=3), FixContext(), log.write)
    assert report.status == "failed" and len(report.attempts) == 1
    assert report.diagnosis["phase"] == "lock" and report.diagnosis["rule"] == "unclassified"
    assert "pyproject.toml" in report.diagnosis["error"]
    assert "attempt 1/3" in log.getvalue()


def test_settings_reject_bad_values() -> None:
    with pytest.raises(ValueError, match="healing_max_attempts: Input should be greater than or equal to 1"):
        HealingSettings.from_sources({"healing_max_attempts": 0})
    with pytest.raises(ValueError, match="unknown device"):
        HealingSettings.from_sources({"device": "tpu"})
    with pytest.raises(ValueError, match="bad healing setting"):
        HealingSettings.from_sources({"healing_demo_timeout_s": "soon"})
    assert HealingSettings.from_sources({"device": "npu"}).profile == "ascend"


def test_gate_fails_fast_on_evidence_for_another_device(tmp_path: Path) -> None:
    directory = spec_only_package(tmp_path)
    passed, summary, _ = healing_gate(directory, directory.name, "cpu", 60)
    assert not passed and "no healing_evidence.json" in summary
    write_evidence(directory, {"device": "npu", "dry_run": {"ok": True}, "real_run": None})
    passed, summary, report = healing_gate(directory, directory.name, "cpu", 60)
    assert not passed and "evidence_device" in summary
    assert "check_adaptation" not in [c["name"] for c in report["checks"]]


@pytest.mark.parametrize(
    "outputs, problem",
    [
        ({"logits": {"shape": [2, 8, 512], "finite": True, "mean_abs": 0.5}}, None),
        ({}, "no outputs"),
        ({"logits": {"shape": [2, 0], "finite": True}}, "no valid shape"),
        ({"logits": {"shape": [2, 8], "finite": False}}, "not finite"),
        ({"logits": {"shape": [2, 8], "finite": True, "mean_abs": float("nan")}}, "non-finite mean"),
    ],
)
def test_output_checks(outputs: dict, problem: str | None) -> None:
    found = outputs_problem(outputs)
    assert (found is None) if problem is None else (problem in found)


def test_stale_evidence_is_removed_when_a_new_heal_starts(tmp_path: Path) -> None:
    directory = spec_only_package(tmp_path)
    write_evidence(directory, {"device": "cpu", "dry_run": {"ok": True}, "real_run": None})
    report = heal(directory, HealingSettings(max_attempts=1), FixContext(), lambda line: None)
    assert report.status == "failed"
    assert not (directory / "healing_evidence.json").exists()
    passed, summary, _ = healing_gate(directory, directory.name, "cpu", 60)
    assert not passed and "no healing_evidence.json" in summary


def test_an_escalators_invalid_proposal_fails_cleanly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from healing import escalation
    from healing.rules import Fix

    monkeypatch.setattr(escalation, "_ESCALATORS", [])
    # stands in for an LLM backend (none exists here) that proposes a malformed edit
    escalation.register_escalator("fake-llm", lambda c, s, d: Fix("bigger batch", {"inputs/batch_size": "lots"}))
    directory = spec_only_package(tmp_path)
    report = heal(directory, HealingSettings(max_attempts=2), FixContext(), lambda line: None)
    assert report.status == "failed" and "invalid spec" in report.diagnosis["reason"]
    assert AdaptationSpec.load(directory).applied_fixes == []  # nothing half-applied
