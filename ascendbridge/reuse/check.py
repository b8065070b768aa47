"""The main job's check before its team-lead pass: per model, each completed stage in order is reused
when its inputs' fingerprint is the one it recorded and the package its gate passed is still there,
byte for byte; the first stage that fails either is rolled back, so it and every later stage run
again. When in doubt it re-runs: no record (completed before re-runs were tracked), an input changed
while the attempt ran, a Hub model without a pinned revision."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ascendbridge.board import BoardError, BoardStore, NewEvent
from ascendbridge.board.records import ModelRecord, TaskRecord
from ascendbridge.reuse.inputs import UNPINNED, UNSTABLE, Hasher, digest, fingerprint
from ascendbridge.reuse.record import package_manifest, recorded
from ascendbridge.stages import STAGES

PART_NAMES = {
    "registration": "its registration",
    "model_files": "the model's files",
    "code": "the stage's code",
    "settings": "its settings",
    "host": "the host or package index",
    "predecessor": "an earlier stage's inputs",
}
FRESH = "--fresh: every stage runs again"


@dataclass(frozen=True)
class Decision:
    """One stage of one model: `reused` (its earlier attempt stands) or `rerun` (from here on)."""

    model_id: str
    stage: str
    action: str  # reused | rerun
    reason: str
    attempt: int = 0  # the earlier attempt a reused stage's result came from
    finished_at: str = ""  # when that attempt's gate passed
    fingerprint: str = ""


def _evidence_changes(completed: Sequence[TaskRecord], now: Mapping[str, str]) -> dict[str, str]:
    """Stage -> why its evidence changed: each file that differs from the package the last gate left
    is charged to the stage that wrote its last version (the earliest from which it stayed so); an
    added file to the first stage that wrote the package."""
    manifests = [(t.stage, (recorded(t) or {}).get("package") or {}) for t in completed]
    if not manifests:
        return {}
    final = manifests[-1][1]
    out: dict[str, str] = {}
    for path in sorted(set(final) | set(now)):
        want = final.get(path)
        if want == now.get(path):
            continue
        owner = manifests[-1][0]
        for stage, files in reversed(manifests):
            if files.get(path) != want or not files:  # an added file: the first stage that wrote the package
                break
            owner = stage
        what = "added" if want is None else "missing" if path not in now else "changed"
        out.setdefault(owner, f"{path} {what} since its gate passed")
    return out


def _why_not(record: dict[str, Any] | None, parts: dict[str, str], evidence: str | None) -> str | None:
    if record is None:
        return "no inputs recorded (completed before re-runs were tracked)"
    if UNSTABLE in record.get("parts", {}):
        return str(record["parts"][UNSTABLE])
    if parts["model_files"] == UNPINNED:
        return "a Hub model without a pinned revision (register it with --revision to reuse its stages)"
    if digest(parts) != record["fingerprint"]:
        was = record.get("parts", {})
        changed = [PART_NAMES.get(name, name) for name in parts if parts[name] != was.get(name)]
        return "changed: " + (", ".join(changed) or "its inputs")
    return evidence


def plan_model(
    model: ModelRecord, tasks: Sequence[TaskRecord], payload: Mapping[str, Any], adaptations: Path, hasher: Hasher
) -> list[Decision]:
    """The decisions for one model: its completed stages reused in order, up to the first that re-runs."""
    ordered = sorted(tasks, key=lambda t: STAGES.index(t.stage))
    completed = [t for t in ordered if t.status == "completed"]
    evidence = _evidence_changes(completed, package_manifest(adaptations / model.adaptation_name))
    out: list[Decision] = []
    previous: str | None = None
    for task in completed:
        record = recorded(task)
        parts = fingerprint(model, task.stage, payload, previous, hasher)
        why = _why_not(record, parts, evidence.get(task.stage))
        if why is not None or record is None:
            out.append(Decision(model.model_id, task.stage, "rerun", why or ""))
            break
        previous = str(record["fingerprint"])
        out.append(Decision(model.model_id, task.stage, "reused", "", task.attempts, task.finished_at or "", previous))
    return out


def plan(store: BoardStore, payload: Mapping[str, Any], adaptations: Path, fresh: bool = False) -> list[Decision]:
    """Every model's decisions; with `fresh`, every model that ran anything re-runs from discovery."""
    hasher = Hasher()
    out: list[Decision] = []
    for model in store.list_models():
        tasks = store.list_tasks(model_id=model.model_id)
        if fresh:
            if any(t.status not in ("waiting", "pending") for t in tasks):
                out.append(Decision(model.model_id, STAGES[0], "rerun", FRESH))
            continue
        out += plan_model(model, tasks, payload, adaptations, hasher)
    return out


def apply(store: BoardStore, decisions: Sequence[Decision], origin: str = "main-job") -> list[str]:
    """Record each reuse as an event and roll each re-run back to its stage; returns the problems
    (a model whose rollback the board refused, e.g. a stage still in progress), one line each."""
    problems = []
    for d in decisions:
        if d.action == "reused":
            message = f"{d.stage} reused: inputs and evidence unchanged since attempt {d.attempt} ({d.finished_at})"
            data = {"attempt": d.attempt, "finished_at": d.finished_at, "fingerprint": d.fingerprint}
            store.add_event(NewEvent("reused", message, d.model_id, d.stage, data, origin))
            continue
        try:
            store.rollback(d.model_id, d.stage, origin=origin)
        except BoardError as exc:
            problems.append(f"{d.model_id}: not re-run from {d.stage}: {exc}")
            continue
        store.add_event(NewEvent("rerun", f"{d.stage} runs again: {d.reason}", d.model_id, d.stage, {}, origin))
    return problems
