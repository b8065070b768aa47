"""Agent runs on the board, the budget they used, and the memory of fixes that worked.

Each agent run is one board event of kind `agent_run` whose data holds backend, role, task kind,
duration, outcome, files changed, prompt hash, tokens, failure signature and (when accepted) the
fix. The budget is the sum over a model's runs for one role; the memory is the newest accepted
run with a matching failure signature. Each remembered fix is also appended, human-readable, to
`.claude/agent-memory/<role>/MEMORY.md` (ASCENDBRIDGE_AGENT_MEMORY moves that directory).

Agents run inside a stage's worker, which never writes the board: `record_run` / `record_reuse`
keep the event in this process (`ascendbridge.stage_events`), the worker puts what `take_events`
returns into the stage's outcome, and the team lead writes it with the attempt's verdict, under the fencing token. The
budget and the memory read the board through the read-only BoardReader and count this process's
own runs too, so a second agent run in the same attempt sees the first.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ascendbridge import stage_events
from ascendbridge.agents.settings import AgentConfig
from ascendbridge.board import BoardStore, UnknownModelError
from ascendbridge.board.reader import open_reader
from ascendbridge.board.records import now_iso
from ascendbridge.config import REPO_ROOT
from ascendbridge.settings import section
from ascendbridge.stage_api import AgentEvent

RUN_EVENT = "agent_run"
REUSE_EVENT = "agent_memory_reuse"
ACCEPTED = "accepted"
# Outcomes that spent nothing (not counted against the budget).
_FREE_OUTCOMES = ("budget_exhausted",)


@dataclass
class AgentRun:
    backend: str
    role: str
    kind: str
    outcome: str  # accepted | rejected_outside | rejected_gate | no_change | timeout | error | budget_exhausted
    duration_s: float = 0.0
    files_changed: list[str] = field(default_factory=list)
    prompt_hash: str = ""
    tokens: int | None = None
    signature: str | None = None
    detail: str = ""
    fix: dict[str, Any] | None = None
    model_id: str | None = None
    stage: str | None = None

    @property
    def accepted(self) -> bool:
        return self.outcome == ACCEPTED

    def message(self) -> str:
        files = f", {len(self.files_changed)} file(s)" if self.files_changed else ""
        return f"{self.role} via {self.backend}: {self.outcome} in {self.duration_s:.1f} s{files}: {self.detail}"[:500]


def failure_signature(role: str, *parts: str) -> str:
    """A stable id for a kind of failure: numbers, paths, hex and quoted names are normalised,
    so the same error on another model (other sizes, other directories) matches."""
    text = " | ".join(parts)
    text = re.sub(r"(/[\w.\-]+)+", "<path>", text)
    text = re.sub(r"0x[0-9a-fA-F]+|\b[0-9a-f]{12,}\b", "<hex>", text)
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    text = re.sub(r"\s+", " ", text).strip().lower()
    return hashlib.sha256(f"{role}|{text}".encode()).hexdigest()[:16]


def record_run(run: AgentRun) -> None:
    """Keep the run for the stage's outcome; the team lead writes it to the board."""
    data = {k: v for k, v in asdict(run).items() if k != "stage"}
    stage_events.record(AgentEvent(RUN_EVENT, run.message(), data, f"agent:{run.backend}"))


def backends_used(events: Iterable[AgentEvent]) -> str:
    """The agent backends that ran in an attempt (its `agent_run` events), comma-separated, or
    "builtin" when none did: the attempt's `agent_backend` on the board."""
    names = {str(e.data.get("backend")) for e in events if e.kind == RUN_EVENT and e.data.get("backend")}
    return ",".join(sorted(names)) or "builtin"


def _runs(board_path: Path | None, model_id: str | None = None) -> list[dict[str, Any]]:
    """Agent runs newest first: this process's own (not on the board yet), then the board's."""
    own = [e.data for e in reversed(stage_events.recorded()) if e.kind == RUN_EVENT]
    reader = open_reader(board_path)
    if reader is None:
        return own
    try:
        try:
            events = reader.events_of_kind(RUN_EVENT, model_id=model_id)
        except UnknownModelError:  # not registered on this board: scan the newest runs
            events = reader.events_of_kind(RUN_EVENT)
    finally:
        reader.close()
    return own + [e.data for e in events]


@dataclass(frozen=True)
class Usage:
    attempts: int = 0
    wall_s: float = 0.0
    tokens: int = 0


def usage(board_path: Path | None, model_id: str | None, role: str) -> Usage:
    """What escalation already spent on this model for this role."""
    if not model_id:
        return Usage()
    runs = [
        r
        for r in _runs(board_path, model_id)
        if r.get("model_id") == model_id and r.get("role") == role and r.get("outcome") not in _FREE_OUTCOMES
    ]
    return Usage(
        len(runs), sum(float(r.get("duration_s") or 0) for r in runs), sum(int(r.get("tokens") or 0) for r in runs)
    )


def list_runs(store: BoardStore, model_id: str | None = None) -> list[dict[str, Any]]:
    """The recorded agent runs (newest first) with their timestamp: for board_ops.py show."""
    return [{"ts": e.ts, **e.data} for e in store.events_of_kind(RUN_EVENT, model_id=model_id)]


def recall(board_path: Path | None, role: str, signature: str) -> AgentRun | None:
    """The newest accepted run of `role` that fixed a failure with this signature."""
    for data in _runs(board_path):
        if (
            data.get("role") == role
            and data.get("signature") == signature
            and data.get("outcome") == ACCEPTED
            and data.get("fix")
        ):
            return AgentRun(**{k: data[k] for k in AgentRun.__dataclass_fields__ if k in data})
    return None


def record_reuse(role: str, signature: str, model_id: str | None, description: str) -> None:
    """Keep a reuse of a remembered fix for the stage's outcome, like record_run."""
    message = f"{role}: reused the recorded fix for failure {signature}: {description}"[:500]
    stage_events.record(
        AgentEvent(REUSE_EVENT, message, {"role": role, "signature": signature, "model_id": model_id}, "agent:memory")
    )


def memory_dir() -> Path:
    return section(AgentConfig).memory or REPO_ROOT / ".claude" / "agent-memory"


def remember(run: AgentRun, failure: str) -> Path:
    """Append the lesson to the role's MEMORY.md (what failed, what fixed it, who and when)."""
    path = memory_dir() / run.role / "MEMORY.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    with path.open("a") as out:
        if new:
            out.write(
                f"# {run.role}: lessons recorded by agent runs\n\nEach entry: a failure signature, the "
                "failure, and the fix that passed the checkers. The built-in agent reuses them.\n"
            )
        out.write(
            f"\n## {run.signature} ({now_iso()[:19]}Z, {run.backend}, model {run.model_id})\n\n"
            f"- failure: {failure.strip()[:400]}\n- fix: {run.detail.strip()[:400]}\n"
            f"- changes: `{run.fix}`\n"
        )
    return path
