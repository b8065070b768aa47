"""The command line the stages' evidence tools share (benchmark_tool, optimization_tool,
business_tool): `aggregate` over every adaptation and `compare A B`, each with `--json`; a tool
adds its own subcommands and arguments to what these return. Run it with `errors.run_cli`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ascendbridge.cli.errors import OneLineParser

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
