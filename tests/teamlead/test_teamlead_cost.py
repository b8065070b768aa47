"""An attempt's cost profile on the board: a real team-lead run of a toy stage that spends a known
time in a named phase (real worker and gate subprocesses)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendbridge.board import BoardStore
from tests.teamlead.tl_support import add_models, attempts, run_tl

pytestmark = pytest.mark.slow  # a real team-lead run


def test_an_attempt_records_where_its_time_and_memory_went(board: BoardStore, tmp_path: Path) -> None:
    add_models(board, {"org/costly": {"discovery": "phase:model_load:0.4"}})
    run = run_tl(board.path, tmp_path, "--stages", "discovery")
    assert run.returncode == 0, run.stderr[-3000:]
    [attempt] = attempts(board, "org/costly", "discovery")
    profile = attempt.cost_profile
    assert attempt.outcome == "completed" and profile is not None and attempt.duration_s is not None
    # the stage's own phase, the worker's start, the gate and the executor's staging copy
    assert profile["model_load"] >= 0.4
    assert profile["process_start"] > 0 and profile["gate"] > 0 and "staging" in profile
    named = sum(s for name, s in profile.items() if name != "other")
    assert named <= attempt.duration_s
    assert sum(profile.values()) == pytest.approx(attempt.duration_s, abs=0.01)  # "other" is the rest
    # the largest process of the attempt: a Python worker is tens of MB, never a few KB (a unit slip)
    assert attempt.peak_rss_bytes is not None and 10 * 2**20 < attempt.peak_rss_bytes < 10 * 2**30
