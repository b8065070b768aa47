"""The discovery run's evidence file, which its gate reads.

The gate runs before the team lead stores the run's proposal on the board, so the run leaves
what it found in a file named after the task's fencing token: a gate can never check a stale
file left by an earlier attempt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ab_runtime.fileops import write_text_atomic
from ascendbridge import capped_read
from ascendbridge.config import logs_dir


def evidence_path(adaptation_name: str, token: int) -> Path:
    return logs_dir() / adaptation_name / "discovery" / f"model_info-token{token}.json"


def write_evidence(path: Path, data: dict[str, Any]) -> None:
    """Atomic: a reader sees the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str))


def read_evidence(path: Path) -> dict[str, Any]:
    return json.loads(capped_read.read_text(path, capped_read.EVIDENCE_MAX_BYTES))
