"""Rendering for CLIs: rich tables for people, plain JSON for machines (`--json`).

Markup and highlighting are off: model ids, descriptions and log lines are data, and a '[' in
them must print as itself.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

NON_TTY_WIDTH = 200


def _console() -> Console:
    width = None if sys.stdout.isatty() else NON_TTY_WIDTH
    return Console(markup=False, highlight=False, emoji=False, width=width, soft_wrap=False)


def cell(value: Any) -> str:
    """How one value reads in a table: empty for None, yes/no for booleans."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


class Output:
    """Where a command writes its result; `json_mode` switches every method to JSON."""

    def __init__(self, json_mode: bool) -> None:
        self.json_mode = json_mode
        self._console = _console()

    def json(self, data: Any) -> None:
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
        sys.stdout.flush()

    def json_line(self, data: Any) -> None:
        """One compact JSON object per line, for streams (`events --follow --json`)."""
        sys.stdout.write(json.dumps(data, default=str) + "\n")
        sys.stdout.flush()

    def line(self, text: str) -> None:
        self._console.print(text)

    def table(self, title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]],
              widths: dict[str, int] | None = None) -> None:
        """A table. With `widths` (every column's width) it is drawn compact, one space between
        columns and cells folding, so its width is known in advance (e.g. to fit 100 columns)."""
        if widths:
            table = Table(title=title, title_justify="left", show_lines=False, box=box.SIMPLE_HEAD,
                          show_edge=False, padding=0)
        else:
            table = Table(title=title, title_justify="left", show_lines=False)
        for name in columns:
            table.add_column(name, overflow="fold", width=(widths or {}).get(name))
        count = 0
        for row in rows:
            table.add_row(*(cell(v) for v in row))
            count += 1
        if count == 0:
            self.line(f"{title}: none" if title else "(none)")
            return
        self._console.print(table)

    def fields(self, title: str, pairs: Iterable[tuple[str, Any]]) -> None:
        """A two-column key/value table."""
        self.table(title, ("field", "value"), ((k, v) for k, v in pairs))


def progress(message: str) -> None:
    """Progress for long work goes to stderr so stdout stays clean for pipes and --json."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
