"""Real team-lead runs on a real board with toy stages: the timed slot never idles while a timed task
is ready, business benchmarks are not starved, an inconclusive gate is re-checked alone without
spending an attempt, and the same error twice ends a task."""

from __future__ import annotations

import os
import signal
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from ascendbridge.board import BoardStore
from ascendbridge.naming import base_adaptation_name
from ascendbridge.workers.placement import is_timed
from tests.teamlead.tl_support import add_models, attempts, check_event_log, run_tl, start_tl, statuses, wait_for
from tests.teamlead.toy_stages import WITH_BUSINESS

pytestmark = pytest.mark.slow  # fast tier: real team-lead runs
CPU_SLOTS = ["--devices", "cpu:0,1", "--timed-cores", "1", "--workers", "2"]  # one timed core, one for preparation
TOLERANCE_S = 2.0  # dispatch latency allowed between a task becoming ready and its start


def _t(stamp: str | None) -> float:
    assert stamp is not None
    return datetime.fromisoformat(stamp).timestamp()


def _intervals(board: BoardStore, models: list[str]) -> list[dict[str, Any]]:
    return [
        {"model": m, "stage": stage, "start": _t(a.started_at), "end": _t(a.finished_at), "outcome": a.outcome}
        for m in models
        for stage, a in board.list_attempts(m)
    ]


def _idle(window: tuple[float, float], busy: list[tuple[float, float]]) -> float:
    """Seconds of `window` not covered by any of the `busy` intervals."""
    start, end = window
    idle, t = 0.0, start
    for b_start, b_end in sorted(busy):
        if b_end <= t:
            continue
        if b_start >= end:
            break
        idle += max(0.0, b_start - t)
        t = max(t, b_end)
    return idle + max(0.0, end - t)


def test_the_timed_slot_never_idles_while_a_timed_task_is_ready_and_models_finish_first(
    board: BoardStore, tmp_path: Path
) -> None:
    models = [f"org/m{i}" for i in range(3)]
    behaviour = {
        "discovery": "sleep:0.2",
        "healing": "sleep:1.5",
        "benchmark": "sleep:1.0",
        "business_benchmark": "sleep:0.5",
    }
    add_models(board, dict.fromkeys(models, behaviour), skip=["adaptation", "optimization", "serving"])
    run = run_tl(
        board.path,
        tmp_path,
        "--stages",
        "discovery,healing,benchmark,business_benchmark",
        *CPU_SLOTS,
        extra=WITH_BUSINESS,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert {
        s
        for (_, stage), s in statuses(board).items()
        if stage not in ("adaptation", "training", "optimization", "quantization", "serving")
    } == {"completed"}  # no training job
    assert all(n == 1 for n in check_event_log(board).values())
    rows = _intervals(board, models)
    done = {(r["model"], r["stage"]): r for r in rows}
    previous = {"benchmark": "healing", "business_benchmark": "benchmark"}
    timed = [r for r in rows if is_timed(r["stage"])]
    busy = [(r["start"], r["end"]) for r in timed]
    ready = {(r["model"], r["stage"]): done[(r["model"], previous[r["stage"]])]["end"] for r in timed}
    for r in timed:  # while it waited, the timed slot was running another timed task
        waited = (ready[(r["model"], r["stage"])], r["start"])
        assert _idle(waited, busy) <= TOLERANCE_S, (
            f"{r['model']}/{r['stage']} waited {waited[1] - waited[0]:.1f} s "
            f"with the timed slot idle for {_idle(waited, busy):.1f} s"
        )
    for bench in (r for r in timed if r["stage"] == "benchmark"):  # a ready business benchmark goes first
        for key, business in ((k, v) for k, v in ready.items() if k[1] == "business_benchmark"):
            if business < bench["start"] - TOLERANCE_S:
                assert done[key]["start"] <= bench["start"], f"{bench['model']}'s benchmark started before {key}"
    prep = [r for r in rows if not is_timed(r["stage"])]  # preparation ran beside the timed stage
    assert any(p["start"] < t["end"] and t["start"] < p["end"] for p in prep for t in timed)
    assert max(r["end"] for r in rows) - min(r["start"] for r in rows) < sum(r["end"] - r["start"] for r in rows)


def test_the_model_with_the_most_work_is_served_first_whatever_its_registration(
    board: BoardStore, tmp_path: Path
) -> None:
    """Registered last, the model that also runs optimization (the shipped cost model's causal_lm
    optimization is minutes) is healed and benchmarked before the two registered earlier; every
    model is discovered first (its family is what it costs), and equals keep registration order."""
    fast = {"discovery": "family:causal_lm", "healing": "sleep:0.2", "benchmark": "sleep:0.2"}
    add_models(board, {"org/a": fast, "org/b": fast}, skip=["adaptation", "optimization", "business_benchmark"])
    add_models(board, {"org/long": fast}, skip=["adaptation", "business_benchmark"])
    one_worker = ["--devices", "cpu:0,1", "--timed-cores", "1", "--workers", "1"]  # one task at a time
    run = run_tl(board.path, tmp_path, "--stages", "discovery,healing,benchmark,optimization", *one_worker)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = sorted(_intervals(board, ["org/a", "org/b", "org/long"]), key=lambda r: r["start"])
    assert [(r["model"], r["stage"]) for r in rows] == [
        ("org/a", "discovery"),
        ("org/b", "discovery"),
        ("org/long", "discovery"),
        ("org/long", "healing"),
        ("org/long", "benchmark"),
        ("org/long", "optimization"),
        ("org/a", "healing"),
        ("org/a", "benchmark"),
        ("org/b", "healing"),
        ("org/b", "benchmark"),
    ]


def test_inconclusive_gates_are_rechecked_alone_and_the_same_error_twice_ends_a_task(
    board: BoardStore, tmp_path: Path
) -> None:
    add_models(
        board,
        {
            "org/noisy": {"benchmark": "inconclusive:2"},
            "org/undecided": {"benchmark": "inconclusive:9"},
            "org/crash": {"discovery": "crash"},
            "org/here": {"discovery": "fail_here"},
        },
        skip=["adaptation", "healing", "optimization", "business_benchmark"],
    )
    run = run_tl(
        board.path,
        tmp_path,
        "--stages",
        "discovery,benchmark",
        *CPU_SLOTS,
        "--gate-rechecks",
        "2",
        "--gate-recheck-delay",
        "0.3",
    )
    assert run.returncode == 1, run.stderr[-3000:]  # three tasks failed
    tasks = {(t.model_id, t.stage): t for t in board.list_tasks()}

    noisy = tasks[("org/noisy", "benchmark")]
    assert noisy.status == "completed" and noisy.attempts == 1  # no attempt spent on the inconclusive gates
    rows = attempts(board, "org/noisy", "benchmark")
    assert [(a.number, a.recheck, a.outcome) for a in rows] == [
        (1, 0, "inconclusive"),
        (1, 1, "inconclusive"),
        (1, 2, "completed"),
    ]
    assert len({a.fencing_token for a in rows}) == 1
    assert rows[0].diagnosis["rule"] == "gate_inconclusive" and "too noisy" in rows[0].diagnosis["summary"]
    assert all(a.devices in ("cpu:0", "cpu:1") for a in rows)  # each re-check placed like a timed job (cpu:0 lent)
    assert rows[1].command.endswith(".gate.job.json") and rows[1].log_path == rows[0].log_path
    live = tmp_path / "adaptations" / base_adaptation_name("org/noisy")
    runs = (live / "runs.log").read_text().splitlines()
    assert [line.split()[0:2] for line in runs if line.startswith("benchmark")] == [["benchmark", "attempt=1"]]
    assert (live / "gate.looks").read_text().count("gate") == 3  # the gate alone ran again, on the kept copy
    shown = [e for e in board.list_events(limit=10**6) if e.kind == "gate_inconclusive" and e.model_id == "org/noisy"]
    assert [e.data["recheck"] for e in shown] == [1, 2] and "no attempt spent" in shown[0].message

    undecided = tasks[("org/undecided", "benchmark")]
    assert undecided.status == "failed" and undecided.attempts == 1
    assert undecided.diagnosis["rule"] == "gate_inconclusive"
    assert "could not decide after 2 re-check(s)" in undecided.diagnosis["summary"]
    assert [a.outcome for a in attempts(board, "org/undecided", "benchmark")] == [
        "inconclusive",
        "inconclusive",
        "failed",
    ]
    undecided_live = tmp_path / "adaptations" / base_adaptation_name("org/undecided")
    runs = (undecided_live / "runs.log").read_text().splitlines()
    assert [line.split()[0] for line in runs] == ["discovery"]  # its benchmark copy never promoted
    assert not (undecided_live / "gate.looks").exists()

    crash = tasks[("org/crash", "discovery")]
    assert crash.status == "failed" and crash.attempts == 2  # not a third try (the budget is 3)
    assert crash.diagnosis["rule"] == "same_error_twice" and crash.diagnosis["error_rule"] == "stage_crashed"
    assert crash.diagnosis["summary"] == "the same error twice: stage crashed: RuntimeError: toy stage crashed"
    assert [a.outcome for a in attempts(board, "org/crash", "discovery")] == ["retry", "failed"]

    # a failure naming its attempt's staging copy names the adaptation directory instead (the
    # copy is discarded), on every attempt alike: the same error twice, not a third try
    here = tasks[("org/here", "discovery")]
    live_here = tmp_path / "adaptations" / base_adaptation_name("org/here")
    assert here.status == "failed" and here.attempts == 2 and here.diagnosis["rule"] == "same_error_twice"
    assert here.diagnosis["summary"] == f"the same error twice: no usable package in {live_here}"
    first = attempts(board, "org/here", "discovery")[0]
    assert first.outcome == "retry" and first.diagnosis["summary"] == f"no usable package in {live_here}"

    assert not list((tmp_path / "adaptations" / ".attempts").glob("*/*"))  # no staging copy left
    assert all(n <= 1 for n in check_event_log(board).values())
    log = (tmp_path / "logs" / "team-lead" / "team_lead.log").read_text()
    assert "gate re-check 1 of attempt 1 started" in log and "the gate could not decide" in log


def test_a_waiting_gate_recheck_survives_stops_and_kills_as_a_stage_run_again(
    board: BoardStore, tmp_path: Path
) -> None:
    """Stopped (SIGTERM) or killed (SIGKILL) while a re-check waits: the task goes back to pending, the
    stage runs again in the next pass, and nothing is ever half-promoted."""
    add_models(
        board,
        {"org/restart": {"benchmark": "inconclusive:1"}},
        skip=["adaptation", "healing", "optimization", "business_benchmark"],
    )
    live = tmp_path / "adaptations" / base_adaptation_name("org/restart")
    staged = tmp_path / "adaptations" / ".attempts"

    def recorded_inconclusive() -> int:
        """Attempts recorded as inconclusive: the re-check waits only once its attempt is on the board
        (the `gate_inconclusive` event comes a moment before; a SIGKILL between the two is a release)."""
        return sum(1 for a in attempts(board, "org/restart", "benchmark") if a.outcome == "inconclusive")

    for sig, seen in ((signal.SIGTERM, 1), (signal.SIGKILL, 2)):
        lead = start_tl(
            board.path,
            tmp_path,
            "--stages",
            "discovery,benchmark",
            *CPU_SLOTS,
            "--gate-recheck-delay",
            "600",
            out=tmp_path / "lead.out",
        )
        wait_for(lambda: recorded_inconclusive() == seen, timeout=180, what="an inconclusive gate")  # noqa: B023
        os.killpg(lead.pid, sig)
        lead.wait(timeout=60)
        assert not (live / "gate.looks").exists()  # nothing promoted
        task = next(t for t in board.list_tasks(model_id="org/restart") if t.stage == "benchmark")
        if sig == signal.SIGTERM:  # released at shutdown, its copy discarded
            assert task.status == "pending" and task.attempts == 0
            assert not list(staged.glob("*/*"))
        else:  # left in progress with its copy: the next start's recovery releases it
            assert task.status == "in_progress" and list(staged.glob("*/*"))
    run = run_tl(board.path, tmp_path, "--stages", "discovery,benchmark", *CPU_SLOTS, "--gate-recheck-delay", "0.3")
    assert run.returncode == 0, run.stderr[-3000:]
    task = next(t for t in board.list_tasks(model_id="org/restart") if t.stage == "benchmark")
    assert task.status == "completed" and task.attempts == 1
    rows = attempts(board, "org/restart", "benchmark")
    assert [(a.number, a.recheck, a.outcome) for a in rows] == [
        (1, 0, "inconclusive"),
        (1, 0, "inconclusive"),
        (1, 0, "inconclusive"),
        (1, 1, "completed"),
    ]
    assert [line.split()[0] for line in (live / "runs.log").read_text().splitlines()] == ["discovery", "benchmark"]
    assert (live / "gate.looks").read_text().count("gate") == 2  # the last pass's copy: its gate and one re-check
    assert not list(staged.glob("*/*"))
    assert all(n <= 1 for n in check_event_log(board).values())
