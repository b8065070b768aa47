"""The shipped table of what each device should deliver (expectations.toml), and the row of a device.

Kept as data beside its sources, so a person can check every figure against the URL it names; the
judge (judge.py) never holds a number of its own.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TABLE = Path(__file__).resolve().parent / "expectations.toml"
FIGURES = ("gemm_float32", "gemm_bfloat16", "gemm_float16", "copy_bandwidth")  # the figures a row may give


@dataclass(frozen=True)
class Expectation:
    """One device's row: its datasheet figures (those found) and where they come from."""

    name: str
    kind: str
    match: str
    figures: dict[str, float] = field(default_factory=dict)
    source: str = ""
    source_url: str = ""
    missing: str = ""  # why a figure is not in the row (then: this host's first acceptance)


@cache
def table() -> tuple[Expectation, ...]:
    rows = tomllib.loads(TABLE.read_text())["device"]
    return tuple(
        Expectation(
            name=row["name"],
            kind=row["kind"],
            match=row["match"],
            figures={key: float(row[key]) for key in FIGURES if key in row},
            source=row.get("source", ""),
            source_url=row.get("source_url", ""),
            missing=row.get("missing", ""),
        )
        for row in rows
    )


def expectation_for(kind: str, name: str, rows: tuple[Expectation, ...] | None = None) -> Expectation | None:
    """The first row of `kind` whose `match` is found in the device name; None for an unlisted device."""
    for row in table() if rows is None else rows:
        if row.kind == kind and re.search(row.match, name):
            return row
    return None
