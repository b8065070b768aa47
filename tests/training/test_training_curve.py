"""The loss-curve PNG of a run directory (framework side, matplotlib): drawn from the step log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ascendbridge.config import REPO_ROOT

SCRIPT = REPO_ROOT / "training" / "scripts" / "loss_curve.py"


def test_the_curve_is_drawn_from_the_step_log_and_a_bad_directory_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text(
        "".join(
            json.dumps({"step": i, "loss": 6.0 - 0.1 * i, "grad_norm": 2.0 - 0.01 * i}) + "\n" for i in range(1, 21)
        )
    )
    (run_dir / "evaluation.json").write_text(
        json.dumps({"before": {"loss": 6.2}, "after": {"loss": 4.1}, "verdict": {"verdict": "improved"}})
    )
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(run_dir)], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT
    )
    assert proc.returncode == 0, proc.stderr
    png = (run_dir / "loss_curve.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    empty = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    assert empty.returncode == 2 and empty.stderr.startswith("error:") and len(empty.stderr.splitlines()) == 1
