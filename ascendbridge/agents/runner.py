"""One bounded, audited escalation to an LLM agent: budget -> prompt -> sandbox -> backend ->
audit -> checker -> apply or discard -> record.

The caller supplies the checker: a function that judges the workspace copy with the agent's
changes (it typically re-renders and runs the stage's gate script there) and returns a verdict,
optionally with the fix to remember. Changes reach the real directory only when every changed
path lies inside the copy and the checker passed; otherwise they are discarded, outside edits to
the real directory are undone, and the run is recorded with the reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ascendbridge.agents import cli_backends, openai_backend  # noqa: F401  (register the backends)
from ascendbridge.agents.backend import BackendRequest, make_backend
from ascendbridge.agents.history import AgentRun, record_run, remember, usage
from ascendbridge.agents.prompts import prompt_hash, render_prompt, role_contract
from ascendbridge.agents.redact import redact
from ascendbridge.agents.sandbox import Workspace
from ascendbridge.agents.settings import AgentSettings

Say = Callable[[str], None]


@dataclass(frozen=True)
class Verdict:
    passed: bool
    summary: str
    fix: dict[str, Any] | None = None  # what to remember for this failure signature


Checker = Callable[[Path, list[str]], Verdict]  # (workspace copy, changed paths) -> verdict


@dataclass
class AgentTask:
    role: str
    kind: str  # prompt template: heal | adapt_unknown_family
    directory: Path  # the adaptation directory the agent may change
    context: dict[str, Any]  # template values (redacted before rendering)
    model_id: str | None = None
    stage: str | None = None
    signature: str | None = None  # failure signature, for memory
    failure: str = ""  # one line, for MEMORY.md
    apply: bool = True  # copy accepted changes into `directory` (False: the caller applies the fix)
    seed: dict[str, str] = field(default_factory=dict)  # files placed in the copy first (e.g. a draft spec)
    settings: Mapping[str, Any] = field(default_factory=dict)


def _budget_left(task: AgentTask, settings: AgentSettings, board_path: Path | None) -> tuple[str | None, float]:
    """(why the budget is exhausted or None, the timeout this run may use)."""
    budget = settings.budget
    used = usage(board_path, task.model_id, task.role)
    if used.attempts >= budget.max_attempts:
        return f"attempt budget spent ({used.attempts}/{budget.max_attempts} agent runs)", 0.0
    if used.tokens >= budget.max_tokens:
        return f"token budget spent ({used.tokens}/{budget.max_tokens} tokens)", 0.0
    left = budget.max_wall_s - used.wall_s
    if left <= 1:
        return f"wall-time budget spent ({used.wall_s:.0f}/{budget.max_wall_s:.0f} s)", 0.0
    return None, min(budget.run_timeout_s, left)


def run_agent(task: AgentTask, check: Checker, board_path: Path | None, say: Say) -> AgentRun | None:
    """Escalate `task` to its role's configured backend; None when the role uses the built-in
    agent (no LLM configured). Raises ValueError only for bad configuration."""
    settings = AgentSettings.from_sources(task.settings)
    name = settings.backend_for(task.role)
    if name == "builtin":
        return None
    run = AgentRun(
        backend=name,
        role=task.role,
        kind=task.kind,
        outcome="error",
        model_id=task.model_id,
        stage=task.stage,
        signature=task.signature,
    )
    exhausted, timeout_s = _budget_left(task, settings, board_path)
    if exhausted:
        run.outcome, run.detail = "budget_exhausted", exhausted
        say(f"agent {task.role} ({name}): not asked: {exhausted}")
        record_run(run)
        return run
    prompt = render_prompt(task.kind, task.context)
    run.prompt_hash = prompt_hash(prompt)
    workspace = Workspace(task.directory, task.seed)
    start = time.monotonic()
    try:
        say(f"agent {task.role} ({name}): working on a copy of {task.directory.name} (timeout {timeout_s:.0f} s)")
        reply = make_backend(name).run(
            BackendRequest(task.role, prompt, role_contract(task.role), workspace.copy, timeout_s)
        )
        run.tokens = reply.tokens
        audit = workspace.audit(reply.refused_paths)
        run.files_changed = audit.changed
        if audit.outside:
            workspace.restore_original()
            run.outcome, run.detail = (
                "rejected_outside",
                "changed paths outside the adaptation: " + ", ".join(audit.outside[:5]),
            )
        elif reply.timed_out:
            run.outcome, run.detail = "timeout", f"killed at its timeout of {timeout_s:.0f} s"
        elif not reply.ok:
            run.outcome, run.detail = "error", reply.error or f"exit code {reply.exit_code}"
        elif not audit.changed:
            run.outcome, run.detail = "no_change", "the agent changed nothing"
        else:
            say(f"agent {task.role} ({name}): {len(audit.changed)} file(s) changed; checking the copy")
            verdict = check(workspace.copy, audit.changed)
            if not verdict.passed:
                run.outcome, run.detail = "rejected_gate", verdict.summary
            else:
                if task.apply:
                    workspace.apply_to_original(audit.changed)
                run.outcome, run.detail, run.fix = "accepted", verdict.summary, verdict.fix
    finally:
        run.duration_s = round(time.monotonic() - start, 2)
        workspace.close()
    run.detail = redact(run.detail)
    say(f"agent {task.role} ({name}): {run.outcome}: {run.detail}")
    record_run(run)
    if run.accepted and run.signature and run.fix:
        remember(run, task.failure)
    return run
