"""What a completed stage leaves for the next pass, under `inputs` in its task's result: the
fingerprint of what it read (ascendbridge/reuse/inputs.py) and the package its gate passed, file by
file (relative path -> sha256)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from ascendbridge.board.records import ModelRecord, TaskRecord
from ascendbridge.reuse.inputs import Hasher, digest, fingerprint, tree
from ascendbridge.stages import STAGES

INPUTS_KEY = "inputs"


def recorded(task: TaskRecord) -> dict[str, Any] | None:
    """The record a completion left, or None (completed before re-runs were tracked, or rolled back)."""
    value = (task.result or {}).get(INPUTS_KEY)
    return value if isinstance(value, dict) and value.get("fingerprint") else None


def predecessor(tasks: Sequence[TaskRecord], stage: str) -> str | None:
    """The fingerprint recorded by the model's last completed stage before `stage` (None: none)."""
    earlier = sorted(
        (t for t in tasks if t.status == "completed" and STAGES.index(t.stage) < STAGES.index(stage)),
        key=lambda t: STAGES.index(t.stage),
    )
    if not earlier:
        return None
    record = recorded(earlier[-1])
    return str(record["fingerprint"]) if record else "not recorded"


def package_manifest(directory: Path) -> dict[str, str]:
    return tree(directory).files if directory.is_dir() else {}


def completion_record(
    model: ModelRecord,
    stage: str,
    tasks: Sequence[TaskRecord],
    payload: Mapping[str, Any],
    adaptation_dir: Path,
    started_at: str | None,
) -> dict[str, Any]:
    """The record the team lead stores with a gated completion (the package already promoted)."""
    since = datetime.fromisoformat(started_at).timestamp() if started_at else None
    parts = fingerprint(model, stage, payload, predecessor(tasks, stage), Hasher(since))
    return {"fingerprint": digest(parts), "parts": parts, "package": package_manifest(adaptation_dir)}
