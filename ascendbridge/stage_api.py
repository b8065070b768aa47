"""The contract between the team lead and a stage.

A stage is a small object with a name, a `run` that executes one model's work inside a worker
subprocess, and a `gate` that independently re-verifies the evidence. The team lead marks a
stage completed only when the gate passes; what `run` says is a proposal.

Stages are found through the `ascendbridge.stages` entry-point group (see pyproject.toml), so
the team lead never imports stage packages by name and third parties can add stages.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional, Protocol, TextIO, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

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

    def read_board(self) -> Optional[BoardReader]:
        """The board, read-only (the caller closes it); None on a host without it (a Ray node)."""
        return open_reader(self.board_path)

    def say(self, message: str) -> None:
        self.log.write(message.rstrip("\n") + "\n")
        self.log.flush()


class Wire(BaseModel):
    """A model that crosses the process boundary as JSON: positional construction like the dataclasses
    it replaced (`GateResult(False, "why")`), unknown keys refused, so both sides share one schema."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    def __init__(self, *args: Any, **data: Any) -> None:
        names = list(type(self).__pydantic_fields__)
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} positional arguments")
        for name, value in zip(names, args):
            if name in data:
                raise TypeError(f"{type(self).__name__} got two values for '{name}'")
            data[name] = value
        super().__init__(**data)

    def to_json(self) -> str:
        """The wire form; values a stage put in free-form dicts (paths, numpy scalars) become strings."""
        return self.model_dump_json(indent=1, fallback=str)


class FigureSet(Wire):
    """Numbers a stage proposes for the board (one device / dtype); written by BoardStore.complete_task."""

    values: dict[str, float]
    device: str = ""
    dtype: str = ""
    units: dict[str, str] = Field(default_factory=dict)
    stack: Optional[dict[str, Any]] = None  # {"stack_id", "data"}: the software stack it was measured on


class AgentEvent(Wire):
    """One agent-history event (ascendbridge/agents/history.py) of this attempt's model and stage:
    the stage records it in memory, the team lead writes it with the attempt's verdict."""

    kind: str
    message: str
    data: dict[str, Any] = Field(default_factory=dict)
    origin: str = "system"


# `model_fields` is the outcome's long-standing field name (stages pass it); pydantic warns that it
# shadows BaseModel.model_fields, which this package reads only on the class (__pydantic_fields__).
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message='Field name "model_fields"', category=UserWarning)

    class StageOutcome(Wire):
        """What a stage's run proposes. `done` still has to pass the gate.

        Stages never write the board: the team lead writes `metrics`, the model metadata and the agent
        history `events` in the same transaction as the attempt's verdict, under the fencing token. A
        failed gate's figures stay in the attempt record, labelled unverified.
        """

        status: OutcomeStatus
        summary: str
        result: dict[str, Any] = Field(default_factory=dict)
        diagnosis: Optional[dict[str, Any]] = None  # machine-readable: {"rule", "summary", ...}
        fix_applied: Optional[str] = None
        model_fields: dict[str, Any] = Field(default_factory=dict)  # discovered metadata columns
        model_metadata: Optional[dict[str, Any]] = None  # full discovered metadata
        metrics: list[FigureSet] = Field(default_factory=list)
        events: list[AgentEvent] = Field(default_factory=list)

        @property
        def succeeded(self) -> bool:
            return self.status in ("done", "skipped")


class GateResult(Wire):
    passed: bool
    summary: str
    report: dict[str, Any] = Field(default_factory=dict)

    @property
    def succeeded(self) -> bool:
        return self.passed


@runtime_checkable
class Stage(Protocol):
    name: str

    def run(self, ctx: StageContext) -> StageOutcome: ...

    def gate(self, ctx: StageContext) -> GateResult: ...
