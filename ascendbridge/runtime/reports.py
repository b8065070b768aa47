"""Reading the machine-readable part of a checker's or a model run's output.

Every gate runs its checker as a separate process and every model run ends with a marked JSON
line; parsing them lives here once, so all stages read evidence the same way.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ascendbridge.runtime.process import CommandResult, run_command


def _as_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def marked_json(output: str, marker: str) -> dict[str, Any] | None:
    """The JSON object on the last line that starts with `marker`, or None."""
    for line in reversed(output.splitlines()):
        if line.startswith(marker):
            return _as_object(line[len(marker):])
    return None


def json_report(output: str) -> dict[str, Any] | None:
    """A checker's `--json` report: its last JSON-object line, or one pretty-printed object at the end."""
    for line in reversed(output.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            found = _as_object(line)
            if found is not None:
                return found
    start = output.find("{")
    return _as_object(output[start:]) if start >= 0 else None


def run_checker(argv: Sequence[str], timeout_s: float) -> tuple[dict[str, Any] | None, CommandResult]:
    """Run a checker contained (own process group, timeout, capped output); parse its report."""
    res = run_command(list(argv), timeout_s=timeout_s)
    return json_report(res.output), res
