"""The watchdog restarts a team lead that exits or goes silent, and stops cleanly; entry scripts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from itertools import chain
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore
from tests.teamlead.tl_support import FAST, alive, tl_env, wait_for

pytestmark = pytest.mark.slow  # a real watchdog restarting a real team lead

REPO = Path(__file__).resolve().parents[2]


def _lead_pid(board: BoardStore) -> int:
    lead = next((a for a in board.list_agents() if a.id == "team-lead" and a.status == "running"), None)
    return int(lead.pid or 0) if lead else 0


def test_watchdog_restarts_on_exit_and_stale_heartbeat_then_stops(board: BoardStore, tmp_path: Path) -> None:
    watch = {"--board": str(board.path), "--stale-after": "8", "--check-every": "0.5", "--max-backoff": "1"}
    lead = [*FAST, "--stages", "discovery"]  # after "--": the team lead's own flags
    argv = [sys.executable, "-m", "ascendbridge.teamlead.watchdog", *chain.from_iterable(watch.items()), "--", *lead]
    out = tmp_path / "watchdog.out"
    dog = subprocess.Popen(
        argv, env=tl_env(tmp_path), stdout=out.open("w"), stderr=subprocess.STDOUT, start_new_session=True
    )
    leads: list[int] = []  # every team lead seen: killed if the test fails midway
    try:
        wait_for(lambda: _lead_pid(board) > 0, 60, what="the first team lead")
        first = _lead_pid(board)
        leads.append(first)
        os.kill(first, signal.SIGKILL)  # exits: restarted
        wait_for(lambda: _lead_pid(board) not in (0, first), 60, what="a restart after exit")
        second = _lead_pid(board)
        leads.append(second)
        os.kill(second, signal.SIGSTOP)  # hangs: its heartbeat goes stale, restarted
        wait_for(lambda: _lead_pid(board) not in (0, first, second), 90, what="a restart after a stale heartbeat")
        third = _lead_pid(board)
        leads.append(third)
        wait_for(lambda: not alive(second), 30, what="the hung team lead to be stopped")
        dog.send_signal(signal.SIGTERM)
        assert dog.wait(timeout=60) == 0
    except BaseException:
        # The team leads run in sessions of their own (`--forever`): a failed wait above would leave
        # them running after the test.
        for pid in {*leads, _lead_pid(board)} - {0}:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        raise
    finally:
        if dog.poll() is None:
            os.killpg(dog.pid, signal.SIGKILL)
    log = out.read_text()
    assert "exited with code -9" in log and "went stale" in log and "SIGTERM received" in log
    wait_for(lambda: not alive(third), 30, what="the last team lead to stop with the watchdog")


def test_entry_scripts_are_executable_and_report_usage_errors(tmp_path: Path) -> None:
    for name in ("run_auto_team_lead.sh", "team_lead_watchdog.sh"):
        assert os.access(REPO / name, os.X_OK), name
    env = dict(os.environ, PROMPT_MODE="sideways")
    res = subprocess.run(
        [str(REPO / "run_auto_team_lead.sh"), "--board", str(tmp_path / "b.db")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1].startswith("error: unknown PROMPT_MODE 'sideways'")
