#!/usr/bin/env python3
"""What a board's evidence cost: slot-minutes per stage and per model, and where the time went.

    uv run bench/evidence_cost.py BOARD                 # one board
    uv run bench/evidence_cost.py BEFORE AFTER          # side by side, with after / before
    uv run bench/evidence_cost.py BOARD --json          # the same figures for machines

A slot is one of the team lead's worker slots: it runs one attempt (run, then gate) at a time, so
slot-minutes are the attempts' durations summed (gate re-checks included): the work done,
whatever the wall time with several slots busy. The cost profile is each attempt's phases
(attempts.cost_profile_json, board version 9: env_sync, process_start, model_load, compile,
warmup, measurement, gate, ...; "other" is what no phase claims) summed per stage, with each
phase's share of the stage's profiled time. A board older than version 9 has durations but no
profiles. Every board is read from a temporary copy (upgraded there when older), never changed
(docs/evidence.md, "Where an attempt's time went").

Exit 0; 2 on bad input (no such file, not a board).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from ascendbridge.attempt_costs import (  # noqa: E402
    AttemptCost,
    attempt_costs,
    by_stage,
    median_per_model,
    shares,
    slot_seconds,
    stage_profiles,
)
from ascendbridge.board import BoardError, BoardStore  # noqa: E402


def load(path: Path) -> list[AttemptCost]:
    """The board's attempts, read from a copy (upgraded there when the board is older), so the board
    itself is never changed, even while a team lead writes it."""
    if not path.is_file():
        raise BoardError(f"no board at {path}")
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / path.name
        source = sqlite3.connect(f"file:{path.absolute()}?mode=ro", uri=True)
        target = sqlite3.connect(copy)
        try:
            source.backup(target)  # a consistent snapshot, its write-ahead log included
        except sqlite3.DatabaseError as exc:
            raise BoardError(f"{path} is not a SQLite database: {exc}") from exc
        finally:
            target.close()
            source.close()
        with BoardStore(copy) as store:
            return attempt_costs(store)


def figures(costs: list[AttemptCost]) -> dict[str, Any]:
    """Everything the tables show, in seconds."""
    return {
        "attempts": len(costs),
        "profiled_attempts": sum(c.profile is not None for c in costs),
        "slot_s": sum(c.duration_s for c in costs),
        "stages": by_stage(costs),
        "median_per_model_s": median_per_model(costs),
        "models": slot_seconds(costs, lambda c: c.model_id),
        "profiles": stage_profiles(costs),
        "peak_rss_bytes": max((c.peak_rss_bytes for c in costs if c.peak_rss_bytes), default=None),
    }


def _minutes(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds / 60:.2f}"


def _ratio(before: float | None, after: float | None) -> str:
    return f"x{after / before:.2f}" if before and after is not None else ""


def _table(title: str, columns: Sequence[str]) -> Table:
    table = Table(title=title, title_justify="left")
    for name in columns:
        table.add_column(name, justify="left" if name in ("stage", "model", "phase") else "right")
    return table


def stage_table(boards: Sequence[dict[str, Any]]) -> Table:
    """Slot-minutes per stage (with its share and the median per model), each board a column group."""
    two = len(boards) == 2
    cols = ["stage", "before", "after", "after / before"] if two else ["stage", "slot-min", "%", "median/model (min)"]
    table = _table("slot-minutes per stage", cols)
    names = list(dict.fromkeys(s for b in boards for s in b["stages"]))
    for stage in names:
        got = [b["stages"].get(stage) for b in boards]
        if two:
            table.add_row(stage, _minutes(got[0]), _minutes(got[1]), _ratio(got[0], got[1]))
        else:
            share = f"{100 * (got[0] or 0) / boards[0]['slot_s']:.0f}" if boards[0]["slot_s"] else ""
            table.add_row(stage, _minutes(got[0]), share, _minutes(boards[0]["median_per_model_s"].get(stage)))
    totals = [b["slot_s"] for b in boards]
    table.add_row(
        "total",
        *([_minutes(totals[0]), _minutes(totals[1]), _ratio(*totals)] if two else [_minutes(totals[0]), "100", ""]),
    )
    return table


def model_table(boards: Sequence[dict[str, Any]]) -> Table:
    """Slot-minutes per model."""
    two = len(boards) == 2
    table = _table(
        "slot-minutes per model", ["model", "before", "after", "after / before"] if two else ["model", "slot-min"]
    )
    for model in dict.fromkeys(m for b in boards for m in b["models"]):
        got = [b["models"].get(model) for b in boards]
        table.add_row(model, *[_minutes(g) for g in got], *([_ratio(got[0], got[1])] if two else []))
    return table


def profile_table(boards: Sequence[dict[str, Any]]) -> Table:
    """Per stage, each phase's minutes and its share of the stage's profiled time."""
    two = len(boards) == 2
    table = _table(
        "cost profile: phases summed per stage",
        ["stage", "phase", "before (min)", "%", "after (min)", "%", "after / before"]
        if two
        else ["stage", "phase", "min", "% of stage"],
    )
    for stage in dict.fromkeys(s for b in boards for s in b["profiles"]):
        per_board = [{share.phase: share for share in shares(b["profiles"].get(stage, {}))} for b in boards]
        for phase in dict.fromkeys(p for got in per_board for p in got):
            found = [got.get(phase) for got in per_board]
            cells = [c for f in found for c in ((_minutes(f.seconds), f"{f.percent:.0f}") if f else ("", ""))]
            ratio = [_ratio(*(f.seconds if f else None for f in found))] if two else []
            table.add_row(stage, phase, *cells, *ratio)
        table.add_section()
    return table


def report(paths: Sequence[Path], boards: Sequence[dict[str, Any]], console: Console) -> None:
    """The three tables, and what each board holds."""
    for label, path, b in zip(("before", "after") if len(boards) == 2 else ("board",), paths, boards):
        peak = f"; largest process {b['peak_rss_bytes'] / 2**20:.0f} MiB" if b["peak_rss_bytes"] else ""
        console.print(
            f"{label}: {path}: {b['attempts']} attempts, {b['slot_s'] / 60:.2f} slot-minutes, "
            f"{b['profiled_attempts']} with a cost profile{peak}"
        )
    console.print("a slot runs one attempt (run, then gate) at a time: slot-minutes are the attempts' durations summed")
    for table in (stage_table(boards), model_table(boards), profile_table(boards)):
        console.print(table)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("boards", nargs="+", type=Path, metavar="BOARD", help="one board, or two: before and after")
    parser.add_argument("--json", action="store_true", help="the figures as JSON (seconds), one object per board")
    args = parser.parse_args(argv)
    if len(args.boards) > 2:
        parser.error("one board, or two (before and after)")
    try:
        boards = [figures(load(path)) for path in args.boards]
    except BoardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([{"board": str(p), **b} for p, b in zip(args.boards, boards)], indent=1))
    else:
        report(args.boards, boards, Console(markup=False, highlight=False, width=120))
    return 0


if __name__ == "__main__":
    sys.exit(main())
