"""The command line the stages' evidence tools share (benchmark_tool, optimization_tool,
business_tool): `aggregate` over every adaptation and `compare A B`, each with `--json`; a tool
adds its own subcommands and arguments to what these return. Run it with `errors.run_cli`."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ascendbridge.cli_errors import OneLineParser

Command = Callable[[argparse.Namespace], int]


def tool_parser(
    description: str, aggregate: Command, reports_dir: Path, aggregate_help: str, figures_dir: Path | None = None
) -> tuple[OneLineParser, Any]:
    """(parser, its subcommands) with `aggregate [--out-dir DIR] [--figures-dir DIR] [--json]`
    (--figures-dir where the tool draws its figures apart from its reports)."""
    parser = OneLineParser(description=description)
    sub = parser.add_subparsers(dest="command", required=True)
    agg = sub.add_parser("aggregate", help=aggregate_help)
    agg.add_argument("--out-dir", default=str(reports_dir))
    if figures_dir is not None:
        agg.add_argument("--figures-dir", default=str(figures_dir))
    agg.add_argument("--json", action="store_true")
    agg.set_defaults(run=aggregate)
    return parser, sub


def add_compare(sub: Any, compare: Command, help_text: str) -> argparse.ArgumentParser:
    """`compare A B [--json]`; returned for the tool's own options."""
    cmp_ = sub.add_parser("compare", help=help_text)
    cmp_.add_argument("a")
    cmp_.add_argument("b")
    cmp_.add_argument("--json", action="store_true")
    cmp_.set_defaults(run=compare)
    return cmp_


def aligned(rows: Sequence[Sequence[str]], left: int = 1) -> list[str]:
    """`compare`'s text table, a line a row: each column as wide as its widest cell, the first
    `left` columns (names) left-aligned and the figures right-aligned, so no name is cut and no
    row drifts out of its column."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        " ".join(f"{cell:<{w}}" if i < left else f"{cell:>{w}}" for i, (cell, w) in enumerate(zip(row, widths)))
        for row in rows
    ]
