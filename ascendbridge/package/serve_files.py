"""What people see of a package's serving deployment (serve/, written by the serving stage): the
serve command, the plan and the quantized checkpoints served beside the float model, read from the
files, for `board_ops.py show` and the dashboard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ascendbridge import capped_read

SERVE_DIR = "serve"  # in the adaptation directory
SERVE_SCRIPT = f"{SERVE_DIR}/serve.sh"
SERVE_PLAN = f"{SERVE_DIR}/plan.json"
SERVE_EVIDENCE = f"{SERVE_DIR}/acceptance.json"  # the serving stage's evidence (serving/steps.py)
MAX_BYTES = 256 * 1024


def serve_command(adaptation_dir: Path) -> str | None:
    """serve.sh's command line (run from the adaptation directory), or None without one."""
    try:
        text = capped_read.read_text(Path(adaptation_dir) / SERVE_SCRIPT, MAX_BYTES)
    except (OSError, ValueError):
        return None
    lines = [line for line in text.splitlines() if line.startswith("exec ")]
    return lines[-1][len("exec ") :] if lines else None


def serve_plan(adaptation_dir: Path) -> dict[str, Any] | None:
    """serve/plan.json ({"local": plan, "ascend": plan}), or None without one."""
    return capped_read.json_object(Path(adaptation_dir) / SERVE_PLAN, MAX_BYTES)


def served_quantized(adaptation_dir: Path) -> dict[str, dict[str, Any]]:
    """Per scheme, the quantized checkpoint the serving stage served here (its `verdict`, `reason`
    and `figures`), from its evidence's `quantized`; empty without one."""
    evidence = capped_read.json_object(Path(adaptation_dir) / SERVE_EVIDENCE, capped_read.EVIDENCE_MAX_BYTES) or {}
    records = evidence.get("quantized")
    if not isinstance(records, dict):
        return {}
    return {str(k): v for k, v in records.items() if isinstance(v, dict)}
