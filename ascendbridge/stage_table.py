"""The stage table: one row per stage, read from the `stage.toml` each stage package owns.

Every kernel table that once listed stages by name (the pipeline order, the timed stages, the
agent roles, the prompt modes, the timeouts...) is derived from these rows, so adding a stage is
one package and its `stage.toml`, no kernel edit (docs/new_stage.md).

A stage is found through the `ascendbridge.stages` entry points; its `stage.toml` lies in the
package of the entry point's module and is read as a file, found with `importlib.util.find_spec`
of the top-level package only, so no stage code runs in the team lead. Imports nothing of
`ascendbridge`: `ascendbridge/stages.py`, imported by every layer, derives its vocabulary from it.

`uv run python -m ascendbridge.stage_table --write` regenerates the table in docs/architecture.md
(a test keeps the two equal); without `--write` it prints the table.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import lru_cache
from importlib.metadata import entry_points
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ENTRY_POINT_GROUP = "ascendbridge.stages"
DESCRIPTION_FILE = "stage.toml"
NAME_PATTERN = r"^[a-z][a-z0-9_]*$"
DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
BEGIN = "<!-- stage-table:begin (generated: uv run python -m ascendbridge.stage_table --write) -->"
END = "<!-- stage-table:end -->"


class StageTableError(Exception):
    """A stage description that is missing, malformed or inconsistent with the others."""


class Placement(BaseModel):
    """What one task of the stage claims from the device pool (ascendbridge/workers/placement.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Timed: its run measures, so it gets devices (or cores) to itself; otherwise a preparation core.
    timed: bool = False
    # Its run includes the profiled run: on Ascend it gets no visible-device mask (CANN's profiler
    # does not support one) but the physical index instead.
    profiling: bool = False
    # How many devices it claims: the plan's count, or at least the serving plan's tensor-parallel
    # degree, or at least the training job's world size.
    claim: Literal["plan", "tensor_parallel", "world_size"] = "plan"


class Column(BaseModel):
    """One figure of the stage people read per model (the main job's summary, the docs table)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    figure: str = Field(min_length=1)  # the metric name the stage's gated FigureSet records
    header: str = Field(min_length=1)  # what people read; the summary finds the figure by it


class StageDescription(BaseModel):
    """One stage's row, as its package's `stage.toml` states it (validated here, unknown keys refused)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    after: str | None = Field(None, pattern=NAME_PATTERN)  # its predecessor; absent for the first stage
    summary: str = Field(min_length=1)  # what it does, one line for the docs table
    role: str = Field(min_length=1)  # agent role of its worker (docs/agents.md)
    timeout_s: float = Field(gt=0)  # default wall-clock limit of one run (--stage-timeout overrides)
    attempts: int = Field(ge=1)  # default attempt budget (--attempts / --stage-attempts override)
    prompt_mode: str = Field(pattern=NAME_PATTERN)  # the PROMPT_MODE that schedules it (with `all`)
    # always: every model; optional: skipped by policy unless enabled; with_training_job: only for
    # a model registered with a training job (otherwise skipped: it has nothing to run).
    runs: Literal["always", "optional", "with_training_job"] = "always"
    # The one stage that changes a package's spec: a later stage's `spec_change` goes back through it.
    changes_spec: bool = False
    # Its first checker accepts a whole package: the healer's escalation and gate run it by path.
    checks_packages: bool = False
    checkers: tuple[str, ...] = Field(min_length=1)  # its gate's code, relative to the package
    gate_timeout_s: float = Field(600.0, gt=0)  # wall-clock limit of its gate's checker process
    placement: Placement = Placement()
    columns: tuple[Column, ...] = ()  # its figures people see per model
    cost_s: float = Field(60.0, gt=0)  # an attempt's seconds where the shipped cost model has none (the ETA's prior)
    # What a billion parameters add to an attempt's seconds (the ETA's size term, teamlead/size_prior.py);
    # 0: the stage does not grow with the model.
    size_s_per_b: float = Field(0.0, ge=0)
    package: Path = Field(exclude=True)  # where the description was found (not part of the file)

    @field_validator("checkers")
    @classmethod
    def _relative(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for path in value:
            if Path(path).is_absolute() or ".." in Path(path).parts:
                raise ValueError(f"checker '{path}' must be a path inside the stage package")
        return value


def package_dir(target: str) -> Path | None:
    """The directory of the package holding `module:attr`'s module, found without importing it."""
    module = target.partition(":")[0]
    parts = module.split(".")
    spec = importlib.util.find_spec(parts[0])  # top level: finding it executes nothing
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*parts[1:-1])


def read_description(name: str, target: str) -> StageDescription:
    """Stage `name`'s description from its package's stage.toml; StageTableError with the remedy."""
    where = package_dir(target)
    if where is None:
        raise StageTableError(f"stage '{name}': no package found for its entry point '{target}'")
    path = where / DESCRIPTION_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError:
        raise StageTableError(f"stage '{name}': {path} is missing: write the stage's {DESCRIPTION_FILE}") from None
    except tomllib.TOMLDecodeError as exc:
        raise StageTableError(f"stage '{name}': {path}: {exc}") from None
    try:
        row = StageDescription.model_validate({**data, "package": where})
    except ValidationError as exc:
        first = exc.errors()[0]
        where_in = ".".join(map(str, first["loc"]))
        raise StageTableError(f"stage '{name}': {path}: {where_in}: {first['msg']}") from None
    if row.name != name:
        raise StageTableError(f"stage '{name}': {path} names '{row.name}'; make the two names equal")
    missing = [c for c in row.checkers if not (where / c).is_file()]
    if missing:
        raise StageTableError(f"stage '{name}': {path}: checker {', '.join(missing)} does not exist in {where}")
    return row


def order(rows: list[StageDescription]) -> tuple[StageDescription, ...]:
    """The rows as one chain: the stage without `after` first, then each one's successor."""
    by_after: dict[str | None, list[StageDescription]] = {}
    for row in rows:
        by_after.setdefault(row.after, []).append(row)
    for after, followers in by_after.items():
        if len(followers) > 1:
            names = ", ".join(sorted(r.name for r in followers))
            raise StageTableError(
                f"stages {names} all follow '{after or '(start)'}': give each its own predecessor (`after`)"
            )
    chain: list[StageDescription] = []
    current: str | None = None
    while current in by_after:
        chain.append(by_after[current][0])
        current = chain[-1].name
    for flag in ("changes_spec", "checks_packages"):
        if len(flagged := [r.name for r in rows if getattr(r, flag)]) > 1:
            raise StageTableError(f"stages {', '.join(flagged)} all set `{flag}`: only one stage may")
    if len(chain) != len(rows):
        lost = ", ".join(sorted({r.name for r in rows} - {r.name for r in chain}))
        raise StageTableError(f"stages {lost} follow no stage of the chain: set their `after` to an existing stage")
    return tuple(chain)


def load_table() -> tuple[StageDescription, ...]:
    """Every stage the installed packages declare, in pipeline order."""
    targets = {ep.name: ep.value.replace(" ", "") for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return order([read_description(name, target) for name, target in sorted(targets.items())])


@lru_cache(maxsize=1)
def stage_table() -> tuple[StageDescription, ...]:
    """The stage table of this process (read once; the packages installed do not change under it).
    A broken description stops the process with its one line (exit 1): nothing can be scheduled,
    shown or registered without the table, and every command reads it on import."""
    try:
        return load_table()
    except StageTableError as exc:
        raise SystemExit(f"error: {exc}") from None


def describe(name: str) -> StageDescription:
    """One stage's row; KeyError for a name that is not a stage."""
    for row in stage_table():
        if row.name == name:
            return row
    raise KeyError(name)


def column_sources() -> dict[str, tuple[str, str]]:
    """Column header -> (stage, figure), over every stage's `columns`: what the main job's summary
    reads a header's figure from."""
    return {c.header: (row.name, c.figure) for row in stage_table() for c in row.columns}


def markdown(rows: tuple[StageDescription, ...]) -> str:
    """The docs table: one line per stage, every field a person plans with."""
    lines = [
        "| # | stage | what it does | role | timed (claim) | runs | timeout, attempts | mode | gate | columns |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for i, r in enumerate(rows):
        timed = f"yes ({r.placement.claim}{', profiling' if r.placement.profiling else ''})"
        gates = ", ".join(f"`{PurePosixPath(r.package.name, c)}`" for c in r.checkers)
        columns = ", ".join(f"{c.header} (`{c.figure}`)" for c in r.columns) or "—"
        lines.append(
            f"| {i} | `{r.name}` | {r.summary} | {r.role} | {timed if r.placement.timed else 'no'} | "
            f"{r.runs.replace('_', ' ')} | {r.timeout_s:g} s, {r.attempts} | `{r.prompt_mode}` | {gates} | {columns} |"
        )
    return "\n".join(lines)


def with_table(doc: str, table: str) -> str:
    """`doc` with the text between the markers replaced by `table`."""
    head, begin, rest = doc.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise StageTableError(f"{DOC.name} has no '{BEGIN}' ... '{END}' block: add the two markers")
    return f"{head}{BEGIN}\n{table}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    """Print the table, or with `--write` regenerate it in docs/architecture.md. Parses its one flag
    itself: the CLI kit (ascendbridge/cli_errors.py) imports the stage vocabulary, which imports this."""
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--write"]):
        print("error: usage: python -m ascendbridge.stage_table [--write]", file=sys.stderr)
        return 2
    table = markdown(stage_table())
    if not args:
        print(table)
        return 0
    try:
        DOC.write_text(with_table(DOC.read_text(encoding="utf-8"), table), encoding="utf-8")
    except StageTableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
