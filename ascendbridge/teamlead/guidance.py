"""Human guidance: recognise directives, apply them through the store, reply with what was done.

A comment is a directive only when every part of it (split on `;` and new lines) is one of:
`priority N`, `skip STAGE`, `retry [STAGE]`, `pause`, `resume`, `allow-remote-code`. Anything
else is free text for agents: kept on the board and answered as noted, never half-applied.

A stage's own finding can be a directive too: a run whose outcome carries a `spec_change` (the
benchmark's dtype island) is sent back (`send_back`): a `directive` event for the healer, which
applies it at the start of its next run (`open_directives`), and a rollback to healing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ascendbridge.board import BoardError, BoardStore, GuidanceRecord, NewEvent, TaskRecord
from ascendbridge.stages import SPEC_STAGE, STAGES

ORIGIN = "team-lead"
HEALER = SPEC_STAGE  # the stage that changes specs: a spec change goes back through it
DIRECTIVE_EVENT = "directive"


@dataclass(frozen=True)
class Directive:
    verb: str  # priority | skip | retry | pause | resume | allow-remote-code
    arg: str | None = None

    def __str__(self) -> str:
        return f"{self.verb} {self.arg}" if self.arg is not None else self.verb


_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("priority", re.compile(r"priority\s*[:=]?\s*(-?\d{1,6})")),
    ("skip", re.compile(r"skip\s+([a-z_]+)")),
    ("retry", re.compile(r"retry(?:\s+([a-z_]+))?")),
    ("pause", re.compile(r"pause")),
    ("resume", re.compile(r"resume")),
    ("allow-remote-code", re.compile(r"allow[-_ ]remote[-_ ]code")),
)


class DirectiveError(ValueError):
    pass


def parse_directives(text: str) -> list[Directive] | None:
    """The directives in `text`, or None when it is free text. Raises on a bad stage name."""
    parts = [p.strip().rstrip(".!").strip().lower() for p in re.split(r"[;\n]", text)]
    parts = [p for p in parts if p]
    if not parts:
        return None
    found: list[Directive] = []
    for part in parts:
        for verb, pattern in _PATTERNS:
            m = pattern.fullmatch(part)
            if m:
                arg = m.group(1) if m.groups() else None
                if verb in ("skip", "retry") and arg is not None and arg not in STAGES:
                    raise DirectiveError(f"unknown stage '{arg}' (expected one of: {', '.join(STAGES)})")
                found.append(Directive(verb, arg))
                break
        else:
            return None
    return found


def _apply_one(store: BoardStore, d: Directive, model_id: str) -> str:
    if d.verb == "priority":
        store.set_priority(model_id, int(d.arg or 0), origin=ORIGIN)
        return f"priority set to {d.arg}"
    if d.verb == "skip":
        store.skip(model_id, d.arg or "", origin=ORIGIN)
        return f"{d.arg} skipped"
    if d.verb == "retry":
        task = store.retry(model_id, d.arg, origin=ORIGIN)
        return f"{task.stage} returned to pending"
    if d.verb in ("pause", "resume"):
        store.set_paused(model_id, d.verb == "pause", origin=ORIGIN)
        return "paused (a running attempt finishes)" if d.verb == "pause" else "resumed"
    store.set_allow_remote_code(model_id, True, origin=ORIGIN)
    return "remote code allowed"


def apply_guidance(store: BoardStore, g: GuidanceRecord, log: Callable[[str], None]) -> str:
    """Apply one open guidance record and reply on the board; returns the reply text."""
    try:
        directives = parse_directives(g.text)
    except DirectiveError as exc:
        reply = f"rejected: {exc}"
        store.reply_guidance(g.id, "rejected", reply)
        log(f"guidance #{g.id}: {reply}")
        return reply
    if directives is None:
        reply = "noted: kept for agents working on " + (g.model_id or "every model")
        store.reply_guidance(g.id, "answered", reply)
        return reply
    targets = [g.model_id] if g.model_id else [m.model_id for m in store.list_models()]
    done: list[str] = []
    errors: list[str] = []
    for d in directives:
        said: list[str] = []
        for model_id in targets:
            try:
                said.append(_apply_one(store, d, model_id))
            except BoardError as exc:
                errors.append(f"{d} on {model_id}: {exc}")
        if g.model_id:
            done.extend(said)
        elif said:
            done.append(f"{d}: applied to {len(said)}/{len(targets)} models")
    state = "applied" if done else "rejected"
    reply = "; ".join(done) if done else "nothing applied"
    if errors:
        shown = "; ".join(errors[:3]) + (f" (+{len(errors) - 3} more)" if len(errors) > 3 else "")
        reply += f"; not applied: {shown}"
    store.reply_guidance(g.id, state, reply[:2000])
    log(f"guidance #{g.id} ({g.model_id or 'all models'}): {reply[:300]}")
    return reply


def apply_open_guidance(store: BoardStore, log: Callable[[str], None]) -> int:
    """Answer every open guidance record, oldest first; returns how many were handled."""
    items = store.list_guidance(state="open")
    for g in items:
        apply_guidance(store, g, log)
    return len(items)


def send_back(
    store: BoardStore, model_id: str, from_stage: str, change: dict[str, Any], origin: str = ORIGIN
) -> list[TaskRecord]:
    """A stage found what only a spec change can fix: record it as a directive for the healer, then
    roll the model back to healing (the finding stage and those after it wait again). The directive
    comes first: a rollback without it would only find the same thing again."""
    summary = f"{HEALER}: {change.get('summary', '')} (found by {from_stage})"
    store.add_event(NewEvent(DIRECTIVE_EVENT, summary, model_id, HEALER, {**change, "from_stage": from_stage}, origin))
    return store.rollback(model_id, HEALER, origin=origin)


def open_directives(store: BoardStore, model_id: str, stage: str = HEALER) -> list[dict[str, Any]]:
    """The directives for `stage` since it last completed, oldest first: each is applied by the run
    that completes after it (a failed attempt starts from the unchanged package and applies it again)."""
    done = max((e.id for e in store.events_of_kind("completed", model_id) if e.stage == stage), default=0)
    return [
        e.data for e in reversed(store.events_of_kind(DIRECTIVE_EVENT, model_id)) if e.stage == stage and e.id > done
    ]


class BoardSteering:
    """The team lead's steering (scheduler.Steering) on one board: people's open guidance, sending a
    stage's spec finding back to the healer, and the directives a stage's worker is handed."""

    def __init__(self, store: BoardStore, log: Callable[[str], None]) -> None:
        self.store, self.log = store, log

    def apply_open(self) -> int:
        return apply_open_guidance(self.store, self.log)

    def send_back(self, model_id: str, from_stage: str, change: dict[str, Any], origin: str) -> object:
        return send_back(self.store, model_id, from_stage, change, origin=origin)

    def directives(self, model_id: str, stage: str) -> list[dict[str, Any]]:
        return open_directives(self.store, model_id, stage)
