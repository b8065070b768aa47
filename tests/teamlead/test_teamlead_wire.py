"""What crosses the process boundary: typed outcomes and verdicts, the worker's job, and a worker
that never touches the board (its agent history travels in the outcome, the team lead writes it)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from ascendbridge.board import BoardError, BoardStore, NewEvent
from ascendbridge.board.reader import open_reader
from ascendbridge.stage_api import AgentEvent, FigureSet, GateResult, StageOutcome
from ascendbridge.workers.payload import PayloadError, Phase, WorkerJob, parse, read_result, to_json, write
from tests.teamlead.tl_support import add_models, run_tl, tl_env


def _job(
    board: BoardStore, tmp: Path, behaviour: str, phase: Phase = "run", board_file: Path | None = None
) -> WorkerJob:
    add_models(board, {"org/wire": {"discovery": behaviour}})
    task = board.claim_task(board.list_tasks(model_id="org/wire")[0].id, "test-owner", lease_s=60)
    return WorkerJob(
        phase=phase,
        stage="discovery",
        task=task,
        model=board.get_model("org/wire"),
        worker_id="test.w1",
        adaptation_dir=tmp / "work" / task.adaptation_name,
        result=tmp / f"{phase}.json",
        board=board_file or board.path,
        settings={"discovery": {"hub_timeout": 2.0}},
    )


def _work(job: WorkerJob, tmp: Path) -> subprocess.CompletedProcess[str]:
    path = tmp / f"{job.phase}.job.json"
    write(path, job)
    return subprocess.run(
        [sys.executable, "-m", "ascendbridge.workers.worker", "--job", str(path)],
        env=tl_env(tmp),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_outcome_and_verdict_round_trip_through_one_schema() -> None:
    outcome = StageOutcome(
        "done",
        "ok",
        result={"file": Path("/x/y")},
        model_fields={"architecture": "Toy"},
        metrics=[FigureSet({"speedup": 2}, device="cpu", units={"speedup": "x"})],
        events=[AgentEvent("agent_run", "healer: accepted", {"fix": {"a": 1}}, "agent:toy")],
    )
    back = parse(StageOutcome, to_json(outcome), "the outcome")
    assert back.result == {"file": "/x/y"}  # a path becomes its string on the wire
    assert back.metrics[0].values == {"speedup": 2.0} and back.model_fields == {"architecture": "Toy"}
    assert back.events == outcome.events and back.succeeded
    verdict = GateResult(False, "evidence missing", {"checks": ["a"]})
    assert parse(GateResult, to_json(verdict), "the verdict") == verdict and not verdict.succeeded
    with pytest.raises(ValidationError, match="valid boolean"):  # refused where the stage builds it
        GateResult("perhaps", "x")  # type: ignore[arg-type]


def test_malformed_payloads_are_refused_with_one_line(board: BoardStore, tmp_path: Path) -> None:
    with pytest.raises(PayloadError) as bad:
        parse(StageOutcome, '{"status": "finished", "summary": "x", "surprise": 1}', "the run result")
    assert str(bad.value) == (
        "the run result is malformed: status: Input should be 'done', 'failed', 'blocked' or 'skipped' (and 1 more)"
    )
    (tmp_path / "gate.json").write_text('{"passed": "perhaps", "summary": "x"}')
    data, why = read_result(tmp_path / "gate.json", "gate")
    assert data is None and why == (
        f"the gate result {tmp_path / 'gate.json'} is malformed: passed: "
        "Input should be a valid boolean, unable to interpret input"
    )
    assert read_result(tmp_path / "absent.json", "run") == (None, "")
    (tmp_path / "job.json").write_text('{"phase": "run"}')
    worker = subprocess.run(
        [sys.executable, "-m", "ascendbridge.workers.worker", "--job", str(tmp_path / "job.json")],
        env=tl_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert worker.returncode == 2 and worker.stderr.count("\n") == 1, worker.stderr
    assert worker.stderr.startswith(f"error: the job file {tmp_path / 'job.json'} is malformed: stage: Field required")


def test_a_worker_without_the_board_completes_its_task(board: BoardStore, tmp_path: Path) -> None:
    job = _job(board, tmp_path, "ok", board_file=tmp_path / "no-board-on-this-host.db")
    run = _work(job, tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    outcome, why = read_result(job.result, "run")
    assert isinstance(outcome, StageOutcome) and outcome.status == "done" and not why
    runs_log = (job.adaptation_dir / "runs.log").read_text()
    assert f"discovery attempt=1 token={job.token} settings=" in runs_log  # from the job, not a board
    assert '"hub_timeout": 2.0' in runs_log
    gate = _work(dataclasses.replace(job, phase="gate", result=tmp_path / "gate.json"), tmp_path)
    assert gate.returncode == 0, gate.stdout[-3000:]
    verdict, _ = read_result(tmp_path / "gate.json", "gate")
    assert isinstance(verdict, GateResult) and verdict.passed


def test_a_worker_never_writes_the_board_its_agent_history_travels_in_the_outcome(
    board: BoardStore, tmp_path: Path
) -> None:
    job = _job(board, tmp_path, "agent")
    before = board.export()
    run = _work(job, tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    assert board.export() == before  # not an event, an agent row or a heartbeat
    outcome, _ = read_result(job.result, "run")
    assert isinstance(outcome, StageOutcome)
    [event] = outcome.events
    assert event.kind == "agent_run" and event.origin == "agent:toy" and event.data["model_id"] == "org/wire"
    assert event.data["detail"] == "runs before this one: 0"
    reader = open_reader(board.path)  # what stages get: reads only
    assert reader is not None
    with pytest.raises(BoardError, match="read-only"):
        reader.add_event(NewEvent("x", "a stage writing"))  # type: ignore[attr-defined]  # not in BoardReader, refused anyway
    reader.close()


def test_the_team_lead_writes_agent_history_in_the_completion_transaction(board: BoardStore, tmp_path: Path) -> None:
    add_models(board, {"org/agent": {"discovery": "agent"}, "org/plain": {"discovery": "ok"}})
    done = run_tl(board.path, tmp_path, "--stages", "discovery")
    assert done.returncode == 0, done.stderr[-3000:]
    events = [e for e in board.list_events(model_id="org/agent", limit=10**6)]
    at = next(i for i, e in enumerate(events) if e.kind == "agent_run")
    run, completed = events[at], events[at + 1]
    assert (run.stage, run.origin, run.data["outcome"]) == ("discovery", "agent:toy", "no_change")
    assert (completed.kind, completed.origin, completed.id) == ("completed", "team-lead", run.id + 1)  # one transaction
    # Each attempt names the agent backends that acted in it (its outcome's agent runs), not a default.
    backends = {
        m: [a.agent_backend for _, a in board.list_attempts(m, "discovery")] for m in ("org/agent", "org/plain")
    }
    assert backends == {"org/agent": ["toy"], "org/plain": ["builtin"]}
