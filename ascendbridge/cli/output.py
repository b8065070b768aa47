"""Rendering for CLIs: rich tables for people, plain JSON for machines (`--json`).

Markup and highlighting are off: model ids, descriptions and log lines are data, and a '[' in
them must print as itself. Tables fit the terminal (NARROW_WIDTH columns when output is not a
terminal): columns a table marks as detail are dropped and long cells wrap; `--wide` keeps every
column at its full width, for wide terminals and for grep.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

NARROW_WIDTH = 100
WIDE_WIDTH = 1000  # --wide: no table is that wide, so nothing wraps or is dropped
_ISO_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(\.\d+)?(\+00:00|Z)?$")


def _console(wide: bool) -> Console:
    width = WIDE_WIDTH if wide else (None if sys.stdout.isatty() else NARROW_WIDTH)
    return Console(markup=False, highlight=False, emoji=False, width=width, soft_wrap=False)


def cell(value: Any, wide: bool = True) -> str:
    """How one value reads in a table: empty for None, yes/no for booleans; narrow tables show
    board timestamps as 'YYYY-MM-DD HH:MM:SS' (UTC) instead of the full ISO form."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    text = str(value)
    if not wide and (match := _ISO_TIME.match(text)):
        return f"{match[1]} {match[2]}"
    return text


class Output:
    """Where a command writes its result; `json_mode` switches every method to JSON."""

    def __init__(self, json_mode: bool, wide: bool = False) -> None:
        self.json_mode, self.wide = json_mode, wide
        self._console = _console(wide)

    def json(self, data: Any) -> None:
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
        sys.stdout.flush()

    def json_line(self, data: Any) -> None:
        """One compact JSON object per line, for streams (`events --follow --json`)."""
        sys.stdout.write(json.dumps(data, default=str) + "\n")
        sys.stdout.flush()

    def line(self, text: str) -> None:
        self._console.print(text)

    def table(
        self,
        title: str | None,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]],
        detail: Sequence[str] = (),
        widths: dict[str, int] | None = None,
    ) -> None:
        """A table. `detail` names columns shown only with --wide (a narrow terminal keeps the
        rest). With `widths` (every column's width) it is drawn compact, one space between
        columns and cells folding, so its width is known in advance (e.g. to fit 100 columns)."""
        keep = [i for i, name in enumerate(columns) if self.wide or name not in detail]
        if widths and not self.wide:
            table = Table(
                title=title, title_justify="left", show_lines=False, box=box.SIMPLE_HEAD, show_edge=False, padding=0
            )
        else:
            table = Table(title=title, title_justify="left", show_lines=False)
        for i in keep:
            width = (widths or {}).get(columns[i]) if not self.wide else None
            table.add_column(columns[i], overflow="fold", width=width)
        count = 0
        for row in rows:
            table.add_row(*(cell(row[i], self.wide) for i in keep))
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
