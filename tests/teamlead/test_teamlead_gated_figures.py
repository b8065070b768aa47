"""Only gated numbers on the board: a stage's proposed figures reach the board with its passing
gate's completion, and a failed gate's figures stay in the attempt record, labelled unverified.

Real team lead (worker and gate subprocesses), real board file, real board_ops.py and a real
dashboard server; the toy stages propose a speedup, and one of them leaves no evidence for its gate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from ascendbridge.board import BoardStore
from ascendbridge.config import REPO_ROOT
from tests.dashboard.dash_support import served
from tests.teamlead.tl_support import add_models, attempts, run_tl, statuses

pytestmark = pytest.mark.slow  # fast tier: a real team-lead run through the gates


def test_failed_gate_figures_never_become_the_models_figures(board: BoardStore, tmp_path: Path) -> None:
    add_models(board, {"org/honest": {"discovery": "figures:1.8"}, "org/liar": {"discovery": "figures_lie:9.5"}})
    run = run_tl(board.path, tmp_path, "--stages", "discovery", "--workers", "2", "--attempts", "1")
    assert run.returncode == 1, run.stderr[-3000:]  # the liar's gate failed
    st = statuses(board)
    assert (st[("org/honest", "discovery")], st[("org/liar", "discovery")]) == ("completed", "failed")

    # Board: the honest figure, written with the completion; nothing for the liar.
    assert [(m.model_id, m.stage, m.name, m.value, m.unit) for m in board.list_metrics()] == [
        ("org/honest", "discovery", "speedup", 1.8, "x")
    ]
    (liar,) = attempts(board, "org/liar", "discovery")
    assert liar.diagnosis["rule"] == "gate_failed"
    assert liar.diagnosis["unverified"]["metrics"][0]["values"] == {"speedup": 9.5}  # kept, labelled

    # board_ops show: gated figures only.
    show = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "board_ops.py"), "show", "org/liar", "--json"],
        env={**os.environ, "ASCENDBRIDGE_BOARD": str(board.path)},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert show.returncode == 0, show.stderr
    assert json.loads(show.stdout)["figures"] == []

    # API and dashboard pages: the same.
    logs, adaptations = tmp_path / "logs", tmp_path / "adaptations"
    with served(tmp_path, board.path, logs, adaptations, wait_s=120) as url:  # a loaded machine starts it slowly
        reports = httpx.get(url + "/api/reports", timeout=10).json()
        assert reports["speedups"] == [{"model_id": "org/honest", "speedup": 1.8}]
        assert httpx.get(url + "/api/models/org/liar", timeout=10).json()["metrics"] == []
        assert httpx.get(url + "/api/models/org/honest", timeout=10).json()["metrics"][0]["value"] == 1.8
        assert "9.5" not in httpx.get(url + "/reports", timeout=10).text
