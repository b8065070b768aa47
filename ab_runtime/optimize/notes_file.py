"""optimization_notes.json: its name, its schema and the one reader.

The optimizer's search writes it (ab_runtime/optimize/optimize.py). Every reader reads it through
`read_notes` here: the optimization stage, its two gates, its aggregate and evidence tool, and the
export's `check_package.py` (which imports the copy inside the exported package). Standard library
only, so the framework (no torch) imports this file, and a file that is not a notes document is
refused the same way everywhere, with one line that names the file and what is wrong.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..metrics_file import EvidenceError, load_json

NOTES_FILE = "optimization_notes.json"
NOTES_SCHEMA = "ascendbridge.optimization_notes/1"
TOP_KEYS = (
    "model_id",
    "adaptation",
    "device",
    "settings",
    "baseline",
    "passes",
    "combination",
    "selection",
    "confirmation",
    "chosen",
    "final",
    "runtime_only",
    "environment",
    "traits",
)


def notes_problem(notes: Any) -> str | None:
    """What makes `notes` (parsed JSON) not a whole notes document: the schema, then the top keys; None when whole."""
    if not isinstance(notes, dict) or notes.get("schema") != NOTES_SCHEMA:
        return f"not an optimization notes document (schema != {NOTES_SCHEMA})"
    missing = [key for key in TOP_KEYS if key not in notes]
    return f"missing: {', '.join(missing)}" if missing else None


def read_notes(path: Path) -> dict[str, Any]:
    """The notes document at `path` (a file, or the adaptation directory holding it), read and its
    shape checked; EvidenceError with one line otherwise."""
    path = Path(path)
    if path.is_dir():
        path = path / NOTES_FILE
    notes = load_json(path, missing=f"not found in {path.parent}; run the optimization stage")
    problem = notes_problem(notes)
    if problem:
        raise EvidenceError(f"{path.name}: {problem}")
    return notes
