"""The healing loop: run, classify, fix the spec, re-render, run again, within a budget.

One attempt = lock, sync, dry run, then the real-weights run when weights are available. The
first failing step is classified; a rule's Fix edits the spec (recorded in applied_fixes with
the rule, description and attempt) and the package is re-rendered from it; a Block ends the
stage as blocked; no rule or no further fix asks the escalation hook and otherwise ends as
failed with the machine-readable diagnosis.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, cast

from ascendbridge.package.spec import AdaptationSpec, AppliedFix
from ascendbridge.package.weights import weights_available
from healing import steps
from healing.classifier import Classification, classify
from healing.escalation import escalate
from healing.evidence import clear_evidence, write_evidence
from healing.failure import Failure
from healing.redact import RedactingWriter
from healing.rules import Block, Fix, FixContext, GiveUp, apply_changes
from healing.settings import HealingSettings

Say = Callable[[str], None]
HealStatus = Literal["done", "failed", "blocked"]


@dataclass
class AttemptReport:
    number: int
    passed: bool
    duration_s: float
    steps: list[str] = field(default_factory=list)  # steps that passed, in order
    diagnosis: dict[str, Any] | None = None
    fix: dict[str, Any] | None = None  # the AppliedFix, dumped

    def as_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "passed": self.passed,
            "duration_s": round(self.duration_s, 2),
            "steps": self.steps,
            "diagnosis": self.diagnosis,
            "fix": self.fix,
        }


@dataclass
class HealReport:
    status: HealStatus
    summary: str
    spec: AdaptationSpec
    attempts: list[AttemptReport]
    diagnosis: dict[str, Any] | None = None
    dry_run: dict[str, Any] | None = None
    real_run: dict[str, Any] | None = None
    real_weights_reason: str = ""

    @property
    def fixes(self) -> list[str]:
        return [a.fix["description"] for a in self.attempts if a.fix]


def _run_attempt(
    directory: Path,
    spec: AdaptationSpec,
    settings: HealingSettings,
    report: AttemptReport,
    log: IO[str] | None,
    say: Say,
) -> tuple[Failure | None, dict[str, Any]]:
    """Run the steps; return the first failure (or None) and the RESULTs of the demo runs."""
    results: dict[str, Any] = {}
    for name, step in (
        ("lock", lambda: steps.lock(directory, log)),
        ("sync", lambda: steps.sync(directory, settings, log)),
    ):
        say(f"  {name} ...")
        failure = step()
        if failure:
            return failure, results
        report.steps.append(name)
    runs = [True]
    available, why = weights_available(spec)
    if settings.real_weights and available:
        runs.append(False)
    results["real_weights_reason"] = why if settings.real_weights else "real-weights run disabled by settings"
    for dry_run in runs:
        phase = "dry_run" if dry_run else "real_run"
        say(f"  {phase.replace('_', ' ')} on {settings.device} ...")
        outcome = steps.demo(directory, settings, dry_run, log)
        if outcome.failure:
            return outcome.failure, results
        results[phase] = outcome.result
        report.steps.append(phase)
        say(
            f"  {phase.replace('_', ' ')} passed in {outcome.duration_s:.1f} s "
            f"(device {outcome.result.get('device_used') if outcome.result else '?'})"
        )
    return None, results


def _fix_for(
    classification: Classification, spec: AdaptationSpec, directory: Path, ctx: FixContext
) -> tuple[Fix | None, Block | None, str, str]:
    """The rule's remedy, or the escalation hook's; returns (fix, block, reason, origin)."""
    reason = "no rule recognises this failure"
    if classification.rule and classification.match:
        remedy = classification.rule.remedy(spec, classification.match, ctx)
        if isinstance(remedy, Fix):
            return remedy, None, "", classification.rule.name
        if isinstance(remedy, Block):
            return None, remedy, remedy.reason, classification.rule.name
        assert isinstance(remedy, GiveUp)
        reason = remedy.reason
    escalated = escalate(classification, spec, directory)
    if escalated:
        origin, fix = escalated
        return fix, None, "", f"escalation:{origin}"
    return None, None, reason, classification.rule_name


def heal(
    directory: Path, settings: HealingSettings, ctx: FixContext, say: Say, log: IO[str] | None = None
) -> HealReport:
    """Heal the adaptation in `directory` (its adaptation.json is the spec) and report."""
    directory = Path(directory)
    spec = AdaptationSpec.load(directory)
    # RedactingWriter is a duck-typed text stream (write/flush): what every log user calls
    log = cast(IO[str], RedactingWriter(log)) if log is not None else None
    clear_evidence(directory)  # only this run's passing attempt may leave evidence for the gate
    attempts: list[AttemptReport] = []
    last: dict[str, Any] | None = None
    pending: Failure | None = None
    failure: Failure | None
    results: dict[str, Any]
    for number in range(1, settings.max_attempts + 1):
        say(f"attempt {number}/{settings.max_attempts}: {spec.name} on {settings.device} (profile {settings.profile})")
        start = time.monotonic()
        report = AttemptReport(number=number, passed=False, duration_s=0.0)
        attempts.append(report)
        if pending:
            failure, results, pending = pending, {}, None
        else:
            failure, results = _run_attempt(directory, spec, settings, report, log, say)
        report.duration_s = time.monotonic() - start
        if failure is None:
            return _passed(directory, settings, spec, attempts, results, say)
        classification = classify(failure)
        last = report.diagnosis = classification.diagnosis(attempt=number)
        say(f"attempt {number}: {failure.phase.replace('_', ' ')} failed: {failure.error}")
        say(f"attempt {number}: diagnosis {classification.rule_name}: {classification.summary}")
        fix, block, reason, origin = _fix_for(classification, spec, directory, ctx)
        if block:
            say(f"attempt {number}: blocked: {block.reason}")
            return HealReport("blocked", block.reason, spec, attempts, {**last, "reason": block.reason})
        if fix is None:
            say(f"attempt {number}: no fix: {reason}")
            return HealReport(
                "failed",
                f"{classification.rule_name}: {classification.summary} ({reason})",
                spec,
                attempts,
                {**last, "reason": reason},
            )
        try:
            fixed = apply_changes(spec, fix.changes)
        except ValueError as exc:  # an escalator's proposal that is not a valid spec
            reason = f"fix '{fix.description}' makes an invalid spec: {str(exc).splitlines()[0]}"
            say(f"attempt {number}: {reason}")
            return HealReport(
                "failed", f"{classification.rule_name}: {reason}", spec, attempts, {**last, "reason": reason}
            )
        if fixed == spec:
            say(f"attempt {number}: fix '{fix.description}' changes nothing; stopping")
            return HealReport(
                "failed",
                f"{classification.rule_name}: the fix changes nothing",
                spec,
                attempts,
                {**last, "reason": f"fix '{fix.description}' changes nothing"},
            )
        applied = AppliedFix(rule=origin, description=fix.description, changes=fix.changes, attempt=number)
        spec = fixed.model_copy(update={"applied_fixes": [*fixed.applied_fixes, applied]})
        report.fix = applied.model_dump(mode="json")
        spec.save(directory)
        say(f"attempt {number}: fix applied ({origin}): {fix.description}; re-rendering")
        pending = steps.rerender(spec, directory, log)  # a failed re-render is the next attempt's failure
    assert last is not None
    reason = f"attempt budget of {settings.max_attempts} exhausted"
    say(f"unresolved: {reason}")
    return HealReport(
        "failed", f"{last['rule']}: {last['summary']} ({reason})", spec, attempts, {**last, "reason": reason}
    )


def _passed(
    directory: Path,
    settings: HealingSettings,
    spec: AdaptationSpec,
    attempts: list[AttemptReport],
    results: dict[str, Any],
    say: Say,
) -> HealReport:
    """The last attempt passed: its evidence for the gate, and the report that says how it got there."""
    report = attempts[-1]
    number = report.number
    report.passed = True
    real = results.get("real_run")
    say(f"attempt {number}: passed ({', '.join(report.steps)})")
    write_evidence(
        directory,
        {
            "device": settings.device,
            "profile": settings.profile,
            "dry_run": results.get("dry_run"),
            "real_run": real,
            "real_weights_reason": results.get("real_weights_reason", ""),
            "attempts": [a.as_dict() for a in attempts],
        },
    )
    fixes = [a.fix["description"] for a in attempts if a.fix]
    summary = (
        f"passed on attempt {number}"
        + (f" after {len(fixes)} fix(es)" if fixes else "")
        + (", real weights verified" if real else ", dry run only")
    )
    return HealReport(
        "done", summary, spec, attempts, None, results.get("dry_run"), real, results.get("real_weights_reason", "")
    )
