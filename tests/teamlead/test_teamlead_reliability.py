"""Reliability: timeouts, killed workers, killed team leads, lost leases, the single-instance lock."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore
from ascendbridge.naming import base_adaptation_name
from tests.teamlead.tl_support import (
    add_models,
    alive,
    attempts,
    check_event_log,
    procs_in,
    run_tl,
    runs_logged,
    start_tl,
    statuses,
    wait_for,
)


def _worker_pid(board: BoardStore, model_id: str, stage: str) -> int:
    """The live worker of the task's current attempt: its job file sits in logs/<adaptation>/<stage>/."""
    task = next(t for t in board.list_tasks(model_id=model_id) if t.stage == stage)
    where = f"/{task.adaptation_name}/{stage}/attempt-{task.attempts}.run.job.json"
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
        except OSError:
            continue
        if b"ascendbridge.workers.worker" in argv and any(arg.decode().endswith(where) for arg in argv):
            return int(entry.name)
    return 0


@pytest.mark.slow  # fast tier: waits out a worker timeout
def test_hung_worker_is_killed_at_its_timeout_and_a_killed_worker_is_retried(board: BoardStore, tmp_path: Path) -> None:
    add_models(board, {"org/hang": {"discovery": "hang_once"}, "org/victim": {"discovery": "hang_once"}})
    lead = start_tl(board.path, tmp_path, "--stages", "discovery", "--stage-timeout", "discovery=20")
    try:
        wait_for(lambda: runs_logged(tmp_path, "org/victim", "attempt=1"), 60, what="victim's first attempt")
        wait_for(lambda: _worker_pid(board, "org/victim", "discovery") > 0, 30, what="victim's worker pid")
        os.kill(_worker_pid(board, "org/victim", "discovery"), signal.SIGKILL)
        out, _ = lead.communicate(timeout=180)
    finally:
        lead.kill()
    assert lead.returncode == 0, out[-3000:]
    hang = attempts(board, "org/hang", "discovery")
    assert [a.outcome for a in hang] == ["retry", "completed"]
    assert hang[0].diagnosis["rule"] == "run_timeout" and hang[0].exit_code is None
    assert "[killed after 20 s timeout]" in Path(hang[0].log_path).read_text()
    victim = attempts(board, "org/victim", "discovery")
    assert [a.outcome for a in victim] == ["retry", "completed"]
    assert victim[0].diagnosis["rule"] == "run_crashed" and victim[0].exit_code == -signal.SIGKILL
    assert procs_in(tmp_path / "adaptations") == []  # the hung children died with their groups
    assert all(n == 1 for n in check_event_log(board).values())


def test_second_team_lead_is_refused_and_sigterm_returns_tasks_to_pending(board: BoardStore, tmp_path: Path) -> None:
    add_models(board, {"org/slow": {"discovery": "sleep:60"}})
    lead = start_tl(board.path, tmp_path, "--stages", "discovery", "--forever")
    try:
        wait_for(lambda: runs_logged(tmp_path, "org/slow", "attempt=1"), 60, what="the first attempt")
        worker = _worker_pid(board, "org/slow", "discovery")
        second = run_tl(board.path, tmp_path, "--stages", "discovery", timeout=60)
        assert second.returncode == 4
        assert second.stderr.strip() == (
            f"error: another team lead (pid {lead.pid}) is already running on this "
            f"board (lock {board.path}-teamlead.lock)"
        )
        lead.send_signal(signal.SIGTERM)
        out, _ = lead.communicate(timeout=60)
    finally:
        lead.kill()
    assert lead.returncode == 128 + signal.SIGTERM, out[-3000:]
    assert "SIGTERM received" in out and "team-lead run summary" in out
    task = next(t for t in board.list_tasks(model_id="org/slow") if t.stage == "discovery")
    assert task.status == "pending" and task.attempts == 0 and task.owner is None
    assert [a.outcome for a in attempts(board, "org/slow", "discovery")] == ["released"]
    assert not alive(worker) and procs_in(tmp_path / "adaptations") == []
    assert {a.status for a in board.list_agents()} == {"stopped"}
    check_event_log(board)


@pytest.mark.slow  # fast tier: repeated real team-lead runs
def test_sigkilled_team_lead_loses_no_work_and_completes_nothing_twice(board: BoardStore, tmp_path: Path) -> None:
    add_models(board, {f"org/m{i}": {"discovery": "sleep:3"} for i in range(3)})
    lead = start_tl(board.path, tmp_path, "--stages", "discovery,adaptation", "--workers", "2")
    wait_for(
        lambda: sum(runs_logged(tmp_path, f"org/m{i}", "attempt=1") for i in range(3)) >= 2,
        60,
        what="two running attempts",
    )
    in_flight = [t for t in board.list_tasks(status="in_progress")]
    workers = [_worker_pid(board, t.model_id, t.stage) for t in in_flight]
    lead.kill()  # SIGKILL: no cleanup at all
    lead.wait()
    # Orphaned workers stop at once (parent-death signal); their tasks are the next team lead's to
    # release (workers never touch the board).
    wait_for(lambda: not any(alive(pid) for pid in workers if pid), 15, what="orphaned workers to exit")
    again = run_tl(board.path, tmp_path, "--stages", "discovery,adaptation", "--workers", "2")
    assert again.returncode == 0, again.stderr[-3000:]
    released = [e for e in board.list_events(limit=10**6) if e.kind in ("released", "lease_expired")]
    assert released
    st = statuses(board)
    assert all(st[(f"org/m{i}", s)] == "completed" for i in range(3) for s in ("discovery", "adaptation"))
    completions = check_event_log(board)
    assert len(completions) == 6 and set(completions.values()) == {1}


def test_a_lost_lease_stops_the_attempt_and_its_result_is_discarded(board: BoardStore, tmp_path: Path) -> None:
    """The team lead keeps the lease (workers never touch the board): when it finds the lease lost it
    cancels the job, whose whole group dies, and records nothing from it but `stale`."""
    add_models(board, {"org/stale": {"discovery": "hang_once"}})
    adaptation = tmp_path / "adaptations" / base_adaptation_name("org/stale")
    lead = start_tl(board.path, tmp_path, "--stages", "discovery", "--forever")
    try:
        wait_for(lambda: runs_logged(tmp_path, "org/stale", "attempt=1"), 60, what="the worker to start its run")
        wait_for(lambda: _worker_pid(board, "org/stale", "discovery") > 0, 30, what="the worker's pid")
        worker = _worker_pid(board, "org/stale", "discovery")
        task = next(t for t in board.list_tasks(model_id="org/stale"))
        board.release_task(task.id, task.fencing_token, "taken away by the test")  # the token is now stale
        wait_for(lambda: not alive(worker), 30, what="the cancelled worker to die")
        wait_for(
            lambda: any(e.kind == "stale_result_discarded" for e in board.list_events(limit=10**6)),
            30,
            what="the stale result to be discarded",
        )
        lead.send_signal(signal.SIGTERM)
        out, _ = lead.communicate(timeout=60)
    finally:
        lead.kill()
    assert "lease lost" in out and "stopping its attempt" in out, out[-3000:]
    first = attempts(board, "org/stale", "discovery")[0]
    assert first.outcome == "stale" and first.fencing_token == task.fencing_token
    assert procs_in(adaptation.parent) == []
    check_event_log(board)
