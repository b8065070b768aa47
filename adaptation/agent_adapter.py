"""The adapter's escalation: when the built-in adapter refuses a model (e.g. an unknown task
family), ask the adapter role's LLM backend for a spec (ascendbridge.agents).

The agent gets a draft adaptation.json (identity and source filled in, the decision left empty)
in a workspace; its spec counts only if identity, source and the remote-code policy are
unchanged, the task family is one the runtime knows, and check_adaptation.py passes on the
rendered copy. A spec that passed before for a refusal with the same signature (same refusal,
architecture and model type) is reused without asking. With the default `builtin` backend
nothing is asked and the refusal stands.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ascendbridge.agents.history import failure_signature, recall, record_reuse
from ascendbridge.agents.runner import AgentTask, Verdict, run_agent
from ascendbridge.agents.settings import AgentSettings
from ascendbridge.board.records import ModelRecord
from ascendbridge.config import adaptations_dir, board_path
from ascendbridge.package.checker import CheckSettings, run_package_checker
from ascendbridge.package.generator import GeneratorError, generate
from ascendbridge.package.spec import SPEC_FILE, AdaptationSpec, ModelSource, apply_changes, load_proposal
from ascendbridge.task_families import TASK_FAMILIES

ROLE = "adapter"
ESCALATED_REFUSALS = ("unknown_task_family",)  # never remote code: that is a person's decision


def draft_spec(record: ModelRecord) -> AdaptationSpec:
    """Everything the board already decided; the family and class are the agent's to fill in."""
    source = record.source if record.source in ("huggingface", "local", "hf-cache") else "huggingface"
    return AdaptationSpec(
        name=record.adaptation_name,
        task_family="",
        model_class="",
        architecture=record.architecture,
        model_type=record.model_type,
        model=ModelSource(model_id=record.model_id, source=source, path=record.path, revision=record.revision),
    )


def _changes(draft: AdaptationSpec, proposed: AdaptationSpec) -> dict[str, Any]:
    before, after = draft.model_dump(mode="json"), proposed.model_dump(mode="json")
    return {key: after[key] for key in sorted(after) if before.get(key) != after[key]}


def _check(draft: AdaptationSpec, copy: Path, changed: list[str]) -> Verdict:
    proposed = load_proposal(draft, copy, changed, "adapter")
    if isinstance(proposed, str):
        return Verdict(False, proposed)
    changes = _changes(draft, proposed)
    if proposed.task_family not in TASK_FAMILIES:
        return Verdict(False, f"task family '{proposed.task_family}' is not one the runtime knows")
    if not proposed.model_class:
        return Verdict(False, "no model_class chosen")
    try:
        generation = generate(proposed, copy)
    except (GeneratorError, ValueError, OSError) as exc:
        return Verdict(False, f"the proposed spec does not render: {exc}")
    if generation.lock is not None and not generation.lock.ok:
        return Verdict(False, f"uv lock fails on the proposed spec: {generation.lock.tail(2)}")
    settings = CheckSettings.from_sources()
    passed, summary, _ = run_package_checker(proposed.name, copy.parent, settings.device, settings.demo_timeout_s)
    if not passed:
        return Verdict(False, f"check_adaptation.py failed on the proposal: {summary}")
    return Verdict(True, f"check_adaptation.py passed: {proposed.task_family} via {proposed.model_class}", changes)


def ask_adapter_agent(record: ModelRecord, refusal: dict[str, Any]) -> AdaptationSpec | None:
    """A spec for a refused model from memory or the adapter's LLM backend, or None."""
    if refusal.get("rule") not in ESCALATED_REFUSALS:
        return None
    try:
        if AgentSettings.from_sources().backend_for(ROLE) == "builtin":
            return None
    except ValueError as exc:
        print(f"error: {exc}; not escalating", file=sys.stderr, flush=True)
        return None
    draft = draft_spec(record)
    signature = failure_signature(ROLE, str(refusal.get("rule")), str(record.architecture), str(record.model_type))
    known = recall(board_path(), ROLE, signature)
    if known is not None and known.fix:
        record_reuse(ROLE, signature, record.model_id, known.detail)
        return apply_changes(draft, known.fix)
    task = AgentTask(
        role=ROLE,
        kind="adapt_unknown_family",
        directory=adaptations_dir() / record.adaptation_name,
        model_id=record.model_id,
        stage="adaptation",
        signature=signature,
        failure=f"{refusal.get('rule')}: {refusal.get('summary')}",
        apply=False,
        seed={SPEC_FILE: draft.to_json()},
        context={
            "model": record.model_dump(mode="json"),
            "name": record.adaptation_name,
            "refusal": refusal,
            "metadata": record.metadata,
            "task_families": sorted(TASK_FAMILIES),
        },
    )
    run = run_agent(
        task,
        lambda copy, changed: _check(draft, copy, changed),
        board_path(),
        lambda line: print(line, file=sys.stderr, flush=True),
    )
    if run is None or not run.accepted or not run.fix:
        return None
    return apply_changes(draft, run.fix)
