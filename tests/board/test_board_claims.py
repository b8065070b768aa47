"""Claims under contention (real processes), lease expiry and reclaim, stale fencing tokens."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from ascendbridge.board import AttemptStart, BoardStore, Registration, StaleTokenError
from ascendbridge.stages import OPTIONAL_STAGES, STAGES, TRAINING_JOB_STAGES

WORKER = Path(__file__).with_name("claim_worker.py")


def test_concurrent_processes_claim_every_task_exactly_once(
    board: BoardStore, board_path: Path, tmp_path: Path
) -> None:
    models = 25
    board.register_models([Registration(model_id=f"org/model-{i}", priority=i % 3) for i in range(models)])
    go = tmp_path / "go"
    procs = []
    for n in range(4):
        out = tmp_path / f"worker-{n}.json"
        cmd = [sys.executable, str(WORKER), str(board_path), f"worker-{n}", str(go), str(out)]
        procs.append((subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True), out))
    time.sleep(1.0)  # let every worker import and open the board before the start signal
    go.touch()
    claimed: list[int] = []
    errors: list[str] = []
    for proc, out in procs:
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        report = json.loads(out.read_text())
        claimed += report["claimed"]
        errors += report["errors"]
    assert errors == []  # in particular no "database is locked"
    # every stage runs by default, business_benchmark included; training only for a model with a job,
    # an optional stage only when a person enables it
    policy_skipped = TRAINING_JOB_STAGES | OPTIONAL_STAGES
    tasks = [t for t in board.list_tasks() if t.stage not in policy_skipped]
    assert Counter(claimed) == Counter(t.id for t in tasks)  # each exactly once
    assert all(t.status == "completed" and t.attempts == 1 for t in tasks)
    assert {t.status for t in board.list_tasks() if t.stage in policy_skipped} == {"skipped"}
    per_worker = [len(json.loads(out.read_text())["claimed"]) for _, out in procs]
    assert sum(per_worker) == models * (len(STAGES) - len(policy_skipped))


def test_expired_lease_is_reclaimed_and_old_token_refused(board: BoardStore) -> None:
    board.register_models([Registration(model_id="m")])
    first = board.claim_next("worker-a", lease_s=0.05)
    assert board.claim_next("worker-b", lease_s=60) is None  # owned, not expired yet
    time.sleep(0.1)
    [reclaimed] = board.reclaim_expired()
    assert reclaimed.id == first.id and reclaimed.status == "pending" and reclaimed.owner is None
    second = board.claim_next("worker-b", lease_s=60)
    assert second.id == first.id and second.fencing_token == first.fencing_token + 1
    assert second.attempts == 2
    for stale_write in (
        lambda: board.complete_task(first.id, first.fencing_token, {}),
        lambda: board.fail_task(first.id, first.fencing_token, {"summary": "late"}),
        lambda: board.heartbeat_task(first.id, first.fencing_token, 60),
        lambda: board.start_attempt(first.id, first.fencing_token, AttemptStart("python demo.py", "log")),
    ):
        with pytest.raises(StaleTokenError, match="stale"):
            stale_write()
    board.complete_task(second.id, second.fencing_token, {"ok": True})
    with pytest.raises(StaleTokenError):  # completed: even the current token is spent
        board.complete_task(second.id, second.fencing_token, {})
    kinds = [e.kind for e in board.list_events(model_id="m")]
    assert kinds[:5] == ["registered", "claimed", "lease_expired", "claimed", "completed"]


def test_heartbeat_extends_the_lease(board: BoardStore) -> None:
    board.register_models([Registration(model_id="m")])
    task = board.claim_next("worker-a", lease_s=0.2)
    board.heartbeat_task(task.id, task.fencing_token, lease_s=60)
    time.sleep(0.3)
    assert board.reclaim_expired() == []
    assert board.get_task(task.id).owner == "worker-a"


def test_cleanup_of_stale_agent_requeues_its_tasks(board: BoardStore) -> None:
    board.register_models([Registration(model_id="m")])
    board.register_agent("adapter-1", "adapter")
    task = board.claim_next("adapter-1", lease_s=600)
    board.agent_heartbeat("adapter-1", current_task_id=task.id)
    time.sleep(0.05)
    [stale] = board.cleanup_stale_agents(stale_after_s=0.01)
    assert stale.id == "adapter-1" and stale.status == "stale"
    assert board.get_task(task.id).status == "pending"
    with pytest.raises(StaleTokenError):
        board.complete_task(task.id, task.fencing_token, {})
    assert board.cleanup_stale_agents(stale_after_s=0.01) == []  # already stale: reported once
    kinds = [e.kind for e in board.list_events()]
    assert "agent_stale" in kinds and "lease_expired" in kinds


def test_claim_specific_task_refuses_a_taken_one(board: BoardStore) -> None:
    board.register_models([Registration(model_id="m")])
    task = board.claim_next("worker-a", lease_s=60)
    with pytest.raises(StaleTokenError, match="in_progress"):
        board.claim_task(task.id, "worker-b", lease_s=60)
