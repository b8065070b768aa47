"""The contract between the team lead and a stage.

A stage is a small object with a name, a `run` that executes one model's work inside a worker
subprocess, and a `gate` that independently re-verifies the evidence. The team lead marks a
stage completed only when the gate passes; what `run` says is a proposal.

Stages are found through the `ascendbridge.stages` entry-point group (see pyproject.toml), so
the team lead never imports stage packages by name and third parties can add stages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TextIO, runtime_checkable

from pydantic import ConfigDict
from pydantic.dataclasses import dataclass as pydantic_dataclass

from ascendbridge.board.reader import BoardReader, open_reader
from ascendbridge.board.records import ModelRecord, TaskRecord

OutcomeStatus = Literal["done", "failed", "blocked", "skipped"]


@dataclass
class StageContext:
    """Everything a stage needs for one model: the records the team lead claimed, the adaptation
    directory, and (through `read_board`) a read-only view of the board."""

    model: ModelRecord
    task: TaskRecord
    adaptation_dir: Path
    board_path: Path
    log: TextIO  # progress lines for people; captured in logs/<adaptation>/<stage>/attempt-N.log
    attempt: int = 1
    settings: dict[str, Any] = field(default_factory=dict)
    # Open directives for this stage (teamlead/guidance.py open_directives), read by the worker's
    # side of the team lead: the healer's is a later stage's spec_change, sent back to it.
    directives: list[dict[str, Any]] = field(default_factory=list)

    def read_board(self) -> BoardReader | None:
        """The board, read-only (the caller closes it); None on a host without it (a Ray node)."""
        return open_reader(self.board_path)

    def say(self, message: str) -> None:
        self.log.write(message.rstrip("\n") + "\n")
        self.log.flush()


# What crosses the process boundary is a pydantic dataclass: validated when a stage builds it and
# again when the other side reads its JSON (ascendbridge/workers/payload.py, one TypeAdapter per
# type), unknown keys refused; a dataclass keeps the positional constructor stages use
# (`GateResult(False, "why")`) visible to type checkers.
WIRE = ConfigDict(extra="forbid")


@pydantic_dataclass(config=WIRE)
class FigureSet:
    """Numbers a stage proposes for the board (one device / dtype); written by BoardStore.complete_task."""

    values: dict[str, float]
    device: str = ""
    dtype: str = ""
    units: dict[str, str] = field(default_factory=dict)
    stack: dict[str, Any] | None = None  # {"stack_id", "data"}: the software stack it was measured on


@pydantic_dataclass(config=WIRE)
class AgentEvent:
    """One agent-history event (ascendbridge/agents/history.py) of this attempt's model and stage:
    the stage records it in memory, the team lead writes it with the attempt's verdict."""

    kind: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)
    origin: str = "system"


@pydantic_dataclass(config=WIRE)
class ProcessCost:
    """Where one worker process's time and memory went: its phases in seconds (ab_runtime/phases.py)
    and the peak resident memory of its largest process. The worker fills it in, never the stage;
    the team lead folds the run's and the gate's into the attempt's cost profile."""

    phases: dict[str, float] = field(default_factory=dict)
    peak_rss_bytes: int | None = None


@pydantic_dataclass(config=WIRE)
class StageOutcome:
    """What a stage's run proposes. `done` still has to pass the gate.

    Stages never write the board: the team lead writes `metrics`, the model metadata and the agent
    history `events` in the same transaction as the attempt's verdict, under the fencing token. A
    failed gate's figures stay in the attempt record, labelled unverified.
    """

    status: OutcomeStatus
    summary: str
    result: dict[str, Any] = field(default_factory=dict)
    diagnosis: dict[str, Any] | None = None  # machine-readable: {"rule", "summary", ...}
    fix_applied: str | None = None
    model_fields: dict[str, Any] = field(default_factory=dict)  # discovered metadata columns
    model_metadata: dict[str, Any] | None = None  # full discovered metadata
    metrics: list[FigureSet] = field(default_factory=list)
    # A finding only a spec change can act on (an operator that refuses a dtype: keep its module in
    # float32): {"rule": the healing rule that fixes it, "summary", "finding": {...}}. The team lead
    # turns it into a directive for the healer and rolls the model back to healing; the stage that
    # found it runs again after the healer's fix (teamlead/guidance.py send_back).
    spec_change: dict[str, Any] | None = None
    events: list[AgentEvent] = field(default_factory=list)
    cost: ProcessCost | None = None  # set by the worker (ascendbridge/workers/worker.py)

    @property
    def succeeded(self) -> bool:
        return self.status in ("done", "skipped")


def failed(summary: str, rule: str, **extra: Any) -> StageOutcome:
    """The failed outcome of every stage: its diagnosis names the rule and repeats the summary, plus
    what the stage adds (`log_tail`, `error`, ...)."""
    return StageOutcome("failed", summary, diagnosis={"rule": rule, "summary": summary, **extra})


@pydantic_dataclass(config=WIRE)
class GateResult:
    passed: bool
    summary: str
    report: dict[str, Any] = field(default_factory=dict)
    # Nothing failed, but a timing check could not decide under the host's load now (passed is
    # False): the team lead re-runs only the gate later, without spending an attempt.
    inconclusive: bool = False
    cost: ProcessCost | None = None  # set by the worker (ascendbridge/workers/worker.py)

    @property
    def succeeded(self) -> bool:
        return self.passed


@runtime_checkable
class Stage(Protocol):
    name: str

    def run(self, ctx: StageContext) -> StageOutcome: ...

    def gate(self, ctx: StageContext) -> GateResult: ...
