"""Stage and status vocabulary shared by the board, the team lead, the CLIs and the dashboard.

The stages are the stage table's (ascendbridge/stage_table.py: each stage package's stage.toml);
it imports nothing of `ascendbridge`, so every layer can depend on this module without cycles.
"""

from __future__ import annotations

from ascendbridge.stage_table import stage_table

STAGES: tuple[str, ...] = tuple(row.name for row in stage_table())

# Stages that are skipped by policy unless a model (or the team lead) enables them (`runs =
# "optional"`); a model's skip policy can still skip any stage.
OPTIONAL_STAGES: frozenset[str] = frozenset(row.name for row in stage_table() if row.runs == "optional")
# Stages that run only for a model registered with a training job (`runs = "with_training_job"`):
# without one they are skipped by policy, having nothing to run.
TRAINING_JOB_STAGES: frozenset[str] = frozenset(row.name for row in stage_table() if row.runs == "with_training_job")
# The stage that changes specs (`changes_spec`): a later stage's spec change goes back through it, and
# once it completed the package's demo runs.
SPEC_STAGE: str = next((row.name for row in stage_table() if row.changes_spec), "")

# waiting: its predecessor has not completed yet (not runnable). The transitions between them:
# docs/architecture.md, "Board states".
STATUSES: tuple[str, ...] = ("waiting", "pending", "in_progress", "completed", "failed", "blocked", "skipped")

TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "blocked", "skipped"})
# Statuses that let the next stage become pending.
DONE_STATUSES: frozenset[str] = frozenset({"completed", "skipped"})
# Attempt outcomes that ran their stage to its own end, so their time is what the stage costs a model
# of that family (the ETA's samples, the shipped cost model): a verdict (completed, or inconclusive:
# the whole stage ran) or the stage's own decision to skip (serving refusing a family, seconds).
COSTED_OUTCOMES: frozenset[str] = frozenset({"completed", "inconclusive", "skipped"})


class UnknownNameError(ValueError):
    """A stage or status name that is not part of the vocabulary."""


def check_stage(name: str) -> str:
    if name not in STAGES:
        raise UnknownNameError(f"unknown stage '{name}' (expected one of: {', '.join(STAGES)})")
    return name


def check_status(name: str) -> str:
    if name not in STATUSES:
        raise UnknownNameError(f"unknown status '{name}' (expected one of: {', '.join(STATUSES)})")
    return name


def stage_index(name: str) -> int:
    return STAGES.index(check_stage(name))


def previous_stage(name: str) -> str | None:
    i = stage_index(name)
    return STAGES[i - 1] if i > 0 else None


def next_stage(name: str) -> str | None:
    i = stage_index(name)
    return STAGES[i + 1] if i + 1 < len(STAGES) else None
