"""What people see of a package's training run (train/run/, written by the training stage): the
loss curve and the held-out evaluation, read from the run's logs, for the dashboard."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ascendbridge import capped_read

RUN_DIR = "train/run"  # relative to the adaptation directory
STEP_LOG = f"{RUN_DIR}/metrics.jsonl"
EVALUATION = f"{RUN_DIR}/evaluation.json"
PROFILE = f"{RUN_DIR}/profile.json"  # the profiled window (ab_runtime/train/profile.py)
MAX_BYTES = 32 * 1024 * 1024
MAX_POINTS = 500  # a longer run's curve is thinned to about this many steps (the last one always kept)


def loss_curve(adaptation_dir: Path) -> dict[str, list[float]] | None:
    """{"step", "loss", "grad_norm"} per logged step (thinned), or None without a step log."""
    try:
        rows = [
            json.loads(line)
            for line in capped_read.read_text(Path(adaptation_dir) / STEP_LOG, MAX_BYTES).splitlines()
            if line.strip()
        ]
    except (OSError, ValueError):
        return None
    if not rows:
        return None
    every = max(1, -(-len(rows) // MAX_POINTS))
    kept = rows[::every] + ([rows[-1]] if (len(rows) - 1) % every else [])
    return {key: [float(r.get(key) or 0.0) for r in kept] for key in ("step", "loss", "grad_norm")}


def profile(adaptation_dir: Path) -> dict[str, Any] | None:
    """profile.json (the step's time by part, the ranked operators, FLOPs per token), or None."""
    return capped_read.json_object(Path(adaptation_dir) / PROFILE, MAX_BYTES)


def evaluation(adaptation_dir: Path) -> dict[str, Any] | None:
    """evaluation.json ({"before", "after", "verdict"}), or None without one."""
    return capped_read.json_object(Path(adaptation_dir) / EVALUATION, MAX_BYTES)
