"""The healer's two escalators (registered on the hook in escalation.py):

1. `memory`: a fix an LLM agent found earlier for a failure with the same signature, recorded
   on the board, is proposed again without asking anyone (the loop and gate still verify it).
2. `agent`: the healer role's configured LLM backend (ascendbridge.agents) edits adaptation.json
   in a copy of the adaptation; the proposal counts only if it keeps to the keys a healer may
   change and check_adaptation.py passes on the re-rendered copy. With the default `builtin`
   backend this escalator answers nothing, so the built-in healer behaves exactly as before.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ascendbridge.agents.history import failure_signature, recall, record_reuse
from ascendbridge.agents.runner import AgentTask, Verdict, run_agent
from ascendbridge.agents.settings import AgentSettings
from ascendbridge.config import board_path
from ascendbridge.package.checker import run_package_checker
from ascendbridge.package.generator import GeneratorError, generate
from ascendbridge.package.spec import SPEC_FILE, AdaptationSpec, load_proposal
from healing.classifier import Classification
from healing.escalation import register_escalator, registered_escalators
from healing.rules import Fix, apply_changes
from healing.settings import HealingSettings

ROLE = "healer"
_NESTED = ("inputs", "dtype", "tolerances")
_PHASE_COMMANDS = {
    "render": "re-render the package from adaptation.json (ascendbridge.package.generator.generate)",
    "lock": "uv lock",
    "sync": "uv sync --locked --extra <profile>",
    "dry_run": "uv run python demo.py --dry-run --device <device>",
    "real_run": "uv run python demo.py --device <device>",
}


def signature_of(classification: Classification) -> str:
    failure = classification.failure
    return failure_signature(ROLE, failure.phase, classification.rule_name, failure.error)


def spec_changes(old: AdaptationSpec, new: AdaptationSpec) -> dict[str, Any]:
    """The edit from `old` to `new` as the loop's path -> value changes."""
    before, after = old.model_dump(mode="json"), new.model_dump(mode="json")
    changes: dict[str, Any] = {}
    for key in sorted(set(before) | set(after)):
        if before.get(key) == after.get(key):
            continue
        if key in _NESTED and isinstance(after.get(key), dict):
            changes.update({f"{key}/{k}": v for k, v in after[key].items() if before.get(key, {}).get(k) != v})
        else:
            changes[key] = after.get(key)
    return changes


def _check_proposal(spec: AdaptationSpec, settings: HealingSettings, copy: Path, changed: list[str]) -> Verdict:
    """The gate for an agent's proposal, run on the workspace copy."""
    proposed = load_proposal(spec, copy, changed, "healer")
    if isinstance(proposed, str):
        return Verdict(False, proposed)
    changes = spec_changes(spec, proposed)
    if not changes:
        return Verdict(False, f"the edited {SPEC_FILE} changes nothing")
    try:
        generation = generate(apply_changes(spec, changes), copy)
    except (GeneratorError, ValueError, OSError) as exc:
        return Verdict(False, f"the proposed spec does not render: {exc}")
    if generation.lock is not None and not generation.lock.ok:
        return Verdict(False, f"uv lock fails on the proposed spec: {generation.lock.tail(2)}")
    passed, summary, _ = run_package_checker(spec.name, copy.parent, settings.device, settings.demo_timeout_s)
    if not passed:
        return Verdict(False, f"check_adaptation.py failed on the proposal: {summary}")
    return Verdict(True, f"check_adaptation.py passed on the proposal ({', '.join(sorted(changes))})", changes)


def memory_escalator(classification: Classification, spec: AdaptationSpec, directory: Path) -> Fix | None:
    """A recorded fix for this failure signature, if it would change this spec."""
    signature = signature_of(classification)
    known = recall(board_path(), ROLE, signature)
    if known is None or not known.fix:
        return None
    try:
        if apply_changes(spec, known.fix) == spec:
            return None  # already tried here: let the next escalator answer
    except ValidationError:
        return None
    record_reuse(ROLE, signature, spec.model.model_id, known.detail)
    return Fix(f"recorded fix for failure {signature} (found by {known.backend} on {known.model_id})", known.fix)


def agent_escalator(classification: Classification, spec: AdaptationSpec, directory: Path) -> Fix | None:
    """Ask the healer's LLM backend; None when it is the built-in agent or the proposal failed."""
    try:
        settings = HealingSettings.from_sources()
        AgentSettings.from_sources()
    except ValueError as exc:
        print(f"error: {exc}; not escalating", file=sys.stderr, flush=True)
        return None
    diagnosis = classification.diagnosis()
    task = AgentTask(
        role=ROLE,
        kind="heal",
        directory=Path(directory),
        model_id=spec.model.model_id,
        stage="healing",
        signature=signature_of(classification),
        failure=f"{classification.rule_name}: {classification.failure.error}",
        apply=False,
        context={
            "model": {
                "model_id": spec.model.model_id,
                "architecture": spec.architecture,
                "model_type": spec.model_type,
            },
            "spec": spec.model_dump(mode="json"),
            "failing_command": _PHASE_COMMANDS.get(classification.failure.phase, classification.failure.phase),
            "diagnosis": diagnosis,
            "log_tail": diagnosis["log_tail"],
            "checker_report": "not run: the failure above happened before the gate "
            "(the gate is adaptation/scripts/check_adaptation.py and the healing gate)",
        },
    )
    run = run_agent(
        task,
        lambda copy, changed: _check_proposal(spec, settings, copy, changed),
        board_path(),
        lambda line: print(line, file=sys.stderr, flush=True),
    )
    if run is None or not run.accepted or not run.fix:
        return None
    return Fix(f"agent ({run.backend}): {json.dumps(run.fix, sort_keys=True)[:300]}", run.fix)


def install() -> None:
    """Register both escalators once (memory first: a known fix costs no LLM call)."""
    names = registered_escalators()
    if "memory" not in names:
        register_escalator("memory", memory_escalator)
    if "agent" not in names:
        register_escalator("agent", agent_escalator)
