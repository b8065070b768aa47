"""`python -m healing`: catalogue listing, classification of a real failure log, bad
input handling (one `error:` line, exit 2, no traceback), and the escalation hook."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ascendbridge.config import REPO_ROOT
from ascendbridge.package.spec import AdaptationSpec, ModelSource
from ascendbridge.workers.process import run_command
from healing import escalation
from healing.classifier import classify
from healing.failure import Failure
from healing.rules import RULES, Fix


def healer(*args: str) -> tuple[int, str]:
    res = run_command([sys.executable, "-m", "healing", *args], cwd=REPO_ROOT, timeout_s=120)
    return res.exit_code, res.output


def test_rules_lists_the_catalogue() -> None:
    code, out = healer("rules", "--json")
    assert code == 0
    assert [r["name"] for r in json.loads(out)] == [r.name for r in RULES]


def test_classify_a_real_failure_log(tmp_path: Path) -> None:
    failed = run_command([sys.executable, "-c", "import tiktoken_is_not_installed_here"], timeout_s=60)
    log = tmp_path / "demo.log"
    log.write_text(failed.output)
    code, out = healer("classify", str(log), "--json")
    assert code == 0
    diagnosis = json.loads(out.strip().splitlines()[-1])
    assert diagnosis["rule"] == "missing_module"
    assert diagnosis["facts"]["modules"] == ["tiktoken_is_not_installed_here"]


@pytest.mark.parametrize(
    "args, message",
    [
        (("heal", "--adapt", "../../etc"), "is not an adaptation name"),
        (("heal", "--adapt", "no-such-adaptation"), "no adaptation 'no-such-adaptation'"),
        (("gate", "--adapt", "no-such-adaptation"), "no adaptation 'no-such-adaptation'"),
        (("classify", "/no/such/file.log"), "cannot read /no/such/file.log"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], message: str, tmp_path: Path) -> None:
    code, out = healer(*args, *(("--adaptations-dir", str(tmp_path)) if args[0] != "classify" else ()))
    assert code == 2
    assert out.strip().startswith("error: ") and message in out and "Traceback" not in out
    assert len(out.strip().splitlines()) == 1


def test_bad_spec_is_reported_not_raised(tmp_path: Path) -> None:
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "adaptation.json").write_text("{not json")
    code, out = healer("heal", "--adapt", "broken", "--adaptations-dir", str(tmp_path))
    assert code == 2 and out.startswith("error: ") and "not a valid spec" in out and "Traceback" not in out


def test_escalation_hook_is_asked_when_no_rule_knows(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(escalation, "_ESCALATORS", [])
    failure = Failure(phase="dry_run", exit_code=1, timed_out=False, output="ValueError: something new\n")
    classification = classify(failure)
    spec = AdaptationSpec(name="x", model=ModelSource(model_id="o/x"), task_family="causal_lm", model_class="M")
    assert escalation.escalate(classification, spec, tmp_path) is None  # built-in agent: nothing registered
    asked = []

    def fake_llm_escalator(c, s, d):  # stands in for an LLM backend (none exists here): proposes an edit
        asked.append(c.rule_name)
        return Fix("agent proposal", {"inputs/batch_size": 1})

    escalation.register_escalator("test-agent", fake_llm_escalator)
    assert escalation.registered_escalators() == ["test-agent"]
    name, fix = escalation.escalate(classification, spec, tmp_path)
    assert name == "test-agent" and fix.changes == {"inputs/batch_size": 1} and asked == ["unclassified"]
