"""The evidence a successful heal leaves for its gate: `healing_evidence.json` in the adaptation.

It holds the RESULT objects of the passing dry run and real-weights run, bound to the exact spec
they ran with (sha256 of adaptation.json), so the gate can re-run and compare rather than trust.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ab_runtime.fileops import sha256_file, write_text_atomic
from ascendbridge.package.spec import SPEC_FILE

EVIDENCE_FILE = "healing_evidence.json"


def spec_digest(directory: Path) -> str:
    return sha256_file(Path(directory) / SPEC_FILE)


def write_evidence(directory: Path, record: dict[str, Any]) -> Path:
    path = Path(directory) / EVIDENCE_FILE
    write_text_atomic(
        path, json.dumps({"spec_sha256": spec_digest(directory), **record}, indent=2, sort_keys=True) + "\n"
    )
    return path


def clear_evidence(directory: Path) -> None:
    (Path(directory) / EVIDENCE_FILE).unlink(missing_ok=True)


def read_evidence(directory: Path) -> dict[str, Any] | None:
    """The evidence object, or None when absent or not a JSON object."""
    try:
        value = json.loads((Path(directory) / EVIDENCE_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None
