"""What crosses the process boundary between the team lead and a worker, as pydantic models.

The team lead sends a `WorkerJob` (the task and model records it claimed, the stage, the
attempt's directory, the fencing token inside the task record, the stage's settings); the
worker sends back a `StageOutcome` (run) or a `GateResult` (gate). All are pydantic dataclasses:
`to_json` writes them and `parse` validates them with one `TypeAdapter` per type, so both sides
check the same schema and a malformed file is refused with one line instead of being read as a
dict of strings. The local executor and the Ray executor use the same files.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass as pydantic_dataclass

from ab_runtime.fileops import write_text_atomic
from ascendbridge import capped_read
from ascendbridge.board.records import ModelRecord, TaskRecord
from ascendbridge.stage_api import WIRE, GateResult, StageOutcome

Phase = Literal["run", "gate"]
PhaseData = StageOutcome | GateResult
_W = TypeVar("_W")


class PayloadError(ValueError):
    """A payload that is missing, unreadable or does not match its schema; the message is one line."""


class OnTask:
    """What a job derives from the task it was claimed for: the team lead's `executor.Job` and the
    worker's `WorkerJob` alike."""

    if TYPE_CHECKING:
        task: TaskRecord

    @property
    def token(self) -> int:
        return self.task.fencing_token

    @property
    def attempt(self) -> int:
        return self.task.attempts


@pydantic_dataclass(config=WIRE)
class WorkerJob(OnTask):
    """One phase of one attempt, as the team lead hands it to a worker: the worker never opens the
    board to learn its task or model, so it runs the same on a host that cannot see the board."""

    phase: Phase
    stage: str
    task: TaskRecord  # as claimed: its fencing_token and attempts are this attempt's
    model: ModelRecord
    worker_id: str
    adaptation_dir: Path  # the attempt's staging copy
    result: Path  # where the worker writes its StageOutcome / GateResult
    board: Path  # the board stages may read (read-only); on a host without it, a path that does not exist
    settings: dict[str, Any] = field(default_factory=dict)
    # The open directives for this stage (teamlead/guidance.py): the healer's are a later stage's
    # spec findings sent back to it.
    directives: list[dict[str, Any]] = field(default_factory=list)


def one_line(exc: ValidationError, what: str) -> str:
    """A validation error as one line: the first problem, and how many more there are."""
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": str(exc)}
    where = ".".join(str(part) for part in first["loc"]) or "the top level"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{what} is malformed: {where}: {first['msg']}{more}"


_adapters: dict[Any, TypeAdapter[Any]] = {}


def _adapter(model: Any) -> TypeAdapter[Any]:
    """One adapter per type (building one compiles its schema)."""
    if model not in _adapters:
        _adapters[model] = TypeAdapter(model)
    return _adapters[model]


def to_json(value: Any) -> str:
    """The wire form; values a stage put in free-form dicts (paths, numpy scalars) become strings."""
    return _adapter(type(value)).dump_json(value, indent=1, fallback=str).decode()


def parse(model: type[_W], text: str, what: str) -> _W:
    """`text` validated as `model`; PayloadError (one line) when it does not match."""
    try:
        return _adapter(model).validate_json(text)
    except ValidationError as exc:
        raise PayloadError(one_line(exc, what)) from None


def to_data(value: Any) -> Any:
    """The wire form as Python values (dicts, lists, strings, numbers)."""
    return _adapter(type(value)).dump_python(value, mode="json", fallback=str)


def from_data(model: type[_W], data: Any, what: str) -> _W:
    """`data` (the wire form as Python values) validated as `model`; PayloadError (one line) if not."""
    try:
        return _adapter(model).validate_python(data)
    except ValidationError as exc:
        raise PayloadError(one_line(exc, what)) from None


def checked(model: type[_W], value: Any, what: str) -> _W:
    """`value` (a `model` built in this process, maybe changed since) as the other side will read it."""
    if not isinstance(value, model):
        raise PayloadError(f"{what} is a {type(value).__name__}, not a {model.__name__}")
    return parse(model, to_json(value), what)


def load(model: type[_W], path: Path, what: str) -> _W:
    try:
        text = capped_read.read_text(path, capped_read.EVIDENCE_MAX_BYTES)  # a result or job file, never whole
    except (OSError, UnicodeDecodeError) as exc:
        raise PayloadError(f"{what} {path} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    return parse(model, text, f"{what} {path}")


def result_model(phase: Phase) -> type[PhaseData]:
    return StageOutcome if phase == "run" else GateResult


def write(path: Path, value: Any) -> None:
    """Written atomically: a reader (or a restarted team lead) never sees half a file."""
    write_text_atomic(path, to_json(value))


def read_result(path: Path, phase: Phase) -> tuple[PhaseData | None, str]:
    """A worker's result file: (the validated model, "") or (None, why not); absent is (None, "")."""
    if not path.exists():
        return None, ""
    try:
        return load(result_model(phase), path, f"the {phase} result"), ""
    except PayloadError as exc:
        return None, str(exc)
