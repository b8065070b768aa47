"""An attempt killed for memory is diagnosed as such and not retried blind: the evidence rule on its
own, a real process killed by SIGKILL while the OOM-kill counter (a stand-in) rises or not, the team
lead's verdict on a worker killed so, and a real team-lead run whose stage's command died that way
(or whose stage raised MemoryError)."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore
from ascendbridge.refusals import is_refusal, remedy
from ascendbridge.teamlead.verdicts import _crash_diagnosis
from ascendbridge.workers import oom
from ascendbridge.workers.executor import PhaseResult
from ascendbridge.workers.process import run_command
from tests.teamlead.tl_support import add_models, attempts, run_tl

SELF_KILL = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]


@pytest.mark.parametrize(
    ("exit_code", "timed_out", "oom_kills", "tail", "memory"),
    [
        (-9, False, 1, "", True),  # SIGKILL while the OOM killer fired
        (137, False, 2, "", True),  # the same through `uv run`
        (-9, False, 0, "", False),  # SIGKILL, the counter still: someone else's kill
        (-9, False, None, "", True),  # no counter on this host: suspected, said so
        (None, True, 1, "", False),  # the timeout's kill
        (1, False, 0, "Traceback ...\nMemoryError", True),  # Python's allocator gave up
        (1, False, 0, "RuntimeError: shapes do not match", False),
        (0, False, 3, "", False),  # a run that ended well
    ],
)
def test_the_evidence_rule(
    exit_code: int | None, timed_out: bool, oom_kills: int | None, tail: str, memory: bool
) -> None:
    found = oom.evidence(exit_code, timed_out, oom_kills, tail)
    assert (found is not None) == memory, found
    if oom_kills is None and memory:
        assert "suspected" in str(found)


def rising(monkeypatch: pytest.MonkeyPatch, rises: bool) -> None:
    counts = itertools.count()
    monkeypatch.setattr(oom, "oom_kill_count", (lambda: next(counts)) if rises else (lambda: 0))


@pytest.mark.parametrize("rises", [True, False])
def test_a_process_killed_by_sigkill_is_a_memory_death_only_when_the_counter_rose(
    monkeypatch: pytest.MonkeyPatch, rises: bool
) -> None:
    rising(monkeypatch, rises)
    oom.take_last()
    result = run_command(SELF_KILL, timeout_s=60)
    assert result.exit_code == -9 and not result.timed_out
    death = oom.take_last()  # a nested command: noted for the worker
    assert (death is not None) == rises and (result.memory_death() is not None) == rises
    if death is not None:
        assert "OOM killer killed 1 process(es)" in death["evidence"]


def test_a_worker_killed_for_memory_is_a_refusal_with_the_evidence(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rising(monkeypatch, True)
    died = run_command(SELF_KILL, timeout_s=60, new_session=True)  # the executor's worker: its own judge
    assert oom.take_last() is None
    phase = PhaseResult(died.exit_code, died.duration_s, died.timed_out, None, died.tail(), memory=died.memory_death())

    class Job:  # the attributes _crash_diagnosis reads
        timeout_s = gate_timeout_s = 60.0
        log_path = tmp_path / "attempt-1.log"

    diagnosis = _crash_diagnosis("run", phase, Job())  # type: ignore[arg-type]  # a stand-in for the executor's Job
    assert diagnosis["rule"] == "out_of_memory" and diagnosis["error_rule"] == "run_crashed"
    assert is_refusal(diagnosis) and "ASCENDBRIDGE_MEMORY_FRACTION" in remedy(diagnosis)
    assert "killed by SIGKILL while the kernel's OOM killer killed" in diagnosis["summary"]
    assert "\n" not in diagnosis["summary"]


@pytest.mark.slow  # a real team-lead run
def test_a_stage_whose_command_died_for_memory_fails_on_its_first_attempt(board: BoardStore, tmp_path: Path) -> None:
    add_models(
        board,
        {
            "org/oom": {"discovery": "memory_killed"},
            "org/killed": {"discovery": "killed"},
            "org/memory_error": {"discovery": "memory_error"},
        },
    )
    run = run_tl(board.path, tmp_path, "--stages", "discovery", "--attempts", "3", "--workers", "2")
    assert run.returncode == 1, run.stderr[-3000:]
    oom_task = next(t for t in board.list_tasks(model_id="org/oom") if t.stage == "discovery")
    assert oom_task.status == "failed" and oom_task.attempts == 1, oom_task
    diagnosis = oom_task.diagnosis
    assert diagnosis["rule"] == "out_of_memory" and diagnosis["error_rule"] == "toy_failure", diagnosis
    assert diagnosis["retryable"] is False and diagnosis["remedy"] and "OOM killer" in diagnosis["summary"]
    # A MemoryError in the stage's own process: the same diagnosis, the crash's rule kept.
    error_task = next(t for t in board.list_tasks(model_id="org/memory_error") if t.stage == "discovery")
    assert error_task.status == "failed" and error_task.attempts == 1, error_task
    assert (error_task.diagnosis["rule"], error_task.diagnosis["error_rule"]) == ("out_of_memory", "stage_crashed")
    # SIGKILL with the counter still is no memory death: retried (until the same error came twice).
    killed = [a.outcome for a in attempts(board, "org/killed", "discovery")]
    assert killed == ["retry", "failed"], killed
    last = next(t for t in board.list_tasks(model_id="org/killed") if t.stage == "discovery").diagnosis
    assert last["rule"] == "same_error_twice" and last["error_rule"] == "toy_failure", last
