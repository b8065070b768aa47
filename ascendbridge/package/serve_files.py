"""What people see of a package's serving deployment (serve/, written by the serving stage): the
serve command and the plan, read from the files, for `board_ops.py show` and the dashboard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ascendbridge import capped_read

SERVE_DIR = "serve"  # in the adaptation directory
SERVE_SCRIPT = f"{SERVE_DIR}/serve.sh"
SERVE_PLAN = f"{SERVE_DIR}/plan.json"
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
