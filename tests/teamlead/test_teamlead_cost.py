"""An attempt's cost profile on the board, and `bench/evidence_cost.py` reading it: one real
team-lead run of toy stages that spend a known time in named phases (real worker and gate
subprocesses), on a real board file."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore
from tests.teamlead.tl_support import add_models, run_tl

pytestmark = pytest.mark.slow  # a real team-lead run

REPO = Path(__file__).resolve().parents[2]
BEHAVIOURS = {
    "org/costly": {"discovery": "phase:model_load:0.4", "adaptation": "phase:measurement:0.3"},
    "org/retried": {"discovery": "fail_once"},
}


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The board after a team-lead run of discovery and adaptation for two toy models."""
    tmp = tmp_path_factory.mktemp("cost")
    path = tmp / "board.db"
    with BoardStore.init(path) as store:
        add_models(store, BEHAVIOURS)
    run = run_tl(path, tmp, "--stages", "discovery,adaptation", "--attempts", "2")
    assert run.returncode == 0, run.stderr[-3000:]
    return path


def test_an_attempt_records_where_its_time_and_memory_went(ran: Path) -> None:
    with BoardStore(ran, read_only=True) as store:
        rows = store.list_attempts("org/costly")
    [attempt] = [a for stage, a in rows if stage == "discovery"]
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


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "bench" / "evidence_cost.py"), *args], capture_output=True, text=True, timeout=120
    )


def test_the_bench_sums_the_boards_attempts_and_shows_their_phases(ran: Path, tmp_path: Path) -> None:
    with BoardStore(ran, read_only=True) as store:
        attempts = [(m.model_id, stage, a) for m in store.list_models() for stage, a in store.list_attempts(m.model_id)]
    assert len(attempts) == 5  # org/retried's discovery ran twice
    out = _bench(str(ran), "--json")
    assert out.returncode == 0, out.stderr
    [board] = json.loads(out.stdout)
    assert board["attempts"] == board["profiled_attempts"] == len(attempts)
    assert board["slot_s"] == pytest.approx(sum(a.duration_s for *_, a in attempts))
    for stage in ("discovery", "adaptation"):
        durations = [a.duration_s for _, s, a in attempts if s == stage]
        assert board["stages"][stage] == pytest.approx(sum(durations))
        assert sum(board["profiles"][stage].values()) == pytest.approx(sum(durations), abs=0.01 * len(durations))
    assert board["models"]["org/retried"] == pytest.approx(
        sum(a.duration_s for m, _, a in attempts if m == "org/retried")
    )
    assert board["profiles"]["discovery"]["model_load"] >= 0.4
    assert board["profiles"]["adaptation"]["measurement"] >= 0.3

    text = _bench(str(ran))
    assert text.returncode == 0, text.stderr
    for shown in ("slot-minutes per stage", "org/retried", "model_load", "measurement", "gate", "other"):
        assert shown in text.stdout

    # before / after: a version-8 copy (no profiles) beside the board; the before board is not changed
    before = tmp_path / "before.db"
    source, target = sqlite3.connect(ran), sqlite3.connect(before)
    source.backup(target)
    source.close()
    for column in ("cost_profile_json", "peak_rss_bytes"):
        target.execute(f"ALTER TABLE attempts DROP COLUMN {column}")
    target.execute("ALTER TABLE models DROP COLUMN proxy_depth")  # version 10's
    target.execute("UPDATE schema_info SET value = '8' WHERE key = 'schema_version'")
    target.commit()
    target.close()
    unchanged = before.read_bytes()
    both = _bench(str(before), str(ran))
    assert both.returncode == 0, both.stderr
    assert "after / before" in both.stdout and "x1.00" in both.stdout  # the same attempts on both
    assert before.read_bytes() == unchanged
    assert _bench(str(tmp_path / "absent.db")).returncode == 2
