"""End-to-end team-lead runs with the toy stages: real board, real worker and gate subprocesses."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendbridge.board import BoardStore
from tests.teamlead.tl_support import (
    add_models,
    attempts,
    check_event_log,
    max_in_flight,
    run_tl,
    runs_logged,
    statuses,
)
from tests.teamlead.toy_stages import ALL

pytestmark = pytest.mark.slow  # fast tier: real team-lead runs through the gated stages


def test_gated_pipeline_retries_budgets_outcomes_and_evidence(board: BoardStore, tmp_path: Path) -> None:
    add_models(
        board,
        {
            "org/ok": {"discovery": "meta"},
            "org/retry": {"adaptation": "fail_once"},
            "org/lie": {"adaptation": "lie"},
            "org/blocked": {"discovery": "blocked"},
            "org/skip": {"discovery": "skipped"},
            "org/crash": {"discovery": "crash"},
            "org/spam": {"discovery": "spam"},
        },
    )
    board.add_guidance("priority 9", "org/crash")
    run = run_tl(
        board.path,
        tmp_path,
        "--stages",
        "discovery,adaptation",
        "--workers",
        "3",
        "--attempts",
        "2",
        "--output-cap",
        "65536",
        "--stage-workers",
        "adaptation=1",
    )
    assert run.returncode == 1, run.stderr[-3000:]  # some tasks failed
    st = statuses(board)
    assert st[("org/ok", "discovery")] == st[("org/ok", "adaptation")] == "completed"
    assert st[("org/ok", "healing")] == "pending"  # outside --stages: left for a later run
    assert st[("org/retry", "adaptation")] == "completed"
    assert [a.outcome for a in attempts(board, "org/retry", "adaptation")] == ["retry", "completed"]
    # A stage saying "done" is not enough: its gate found no evidence, twice, so it failed.
    lie = next(t for t in board.list_tasks(model_id="org/lie") if t.stage == "adaptation")
    assert lie.status == "failed" and lie.diagnosis["error_rule"] == "gate_failed" and lie.diagnosis["budget"] == 2
    assert lie.diagnosis["rule"] == "same_error_twice"  # the same gate finding twice in a row
    assert [a.outcome for a in attempts(board, "org/lie", "adaptation")] == ["retry", "failed"]
    assert st[("org/blocked", "discovery")] == "blocked" and st[("org/blocked", "adaptation")] == "waiting"
    assert {st[("org/skip", s)] for s in ("discovery", "adaptation", "healing", "benchmark")} == {"skipped"}
    assert board.get_model("org/skip").parameter_count == 10**12  # metadata kept even when skipped
    ok = board.get_model("org/ok")
    assert ok.architecture == "ToyForCausalLM" and ok.metadata == {"toy": True}
    done = next(t for t in board.list_tasks(model_id="org/ok") if t.stage == "discovery")
    assert done.result["gate"]["summary"] == "evidence matches" and done.result["fix_applied"] == "toy-fix"
    crash = attempts(board, "org/crash", "discovery")
    assert [a.outcome for a in crash] == ["retry", "failed"]
    assert crash[0].diagnosis["rule"] == "stage_crashed" and crash[-1].diagnosis["error_rule"] == "stage_crashed"
    log = Path(crash[0].log_path).read_text()
    assert "Traceback" in log and "RuntimeError: toy stage crashed" in log
    assert crash[0].command.split()[1:3] == ["-m", "ascendbridge.workers.worker"] and crash[0].duration_s > 0
    # Priority (set by guidance before the first dispatch) put org/crash first.
    claims = [e.model_id for e in board.list_events(limit=10**6) if e.kind == "claimed"]
    assert claims[0] == "org/crash"
    guidance = board.list_guidance()[0]
    assert guidance.state == "applied"
    spam_log = Path(attempts(board, "org/spam", "discovery")[0].log_path)
    assert "[output capped at 65536 bytes]" in spam_log.read_text() and spam_log.stat().st_size < 2 * 65536 + 4096
    assert all(count == 1 for count in check_event_log(board).values())
    assert max_in_flight(board, "adaptation") == 1 and max_in_flight(board) == 3  # per-stage and total caps
    agents = {a.id: a for a in board.list_agents()}
    assert agents["team-lead"].status == "stopped"
    started = {e.message.split()[0] for e in board.list_events(limit=10**6) if e.kind == "agent_started"}
    assert started == {"team-lead", "discoverer", "adapter"}  # workers take their stage's role
    assert "team-lead run summary" in run.stdout and "failed" in run.stdout
    assert (tmp_path / "logs" / "team-lead" / "team_lead.log").read_text().count("attempt 1 started") >= 7


def test_unloadable_stage_waits_and_import_crash_is_a_failed_attempt(board: BoardStore, tmp_path: Path) -> None:
    add_models(board, {"org/one": {}})
    missing = ALL.replace("tests.teamlead.toy_stages:ADAPTATION", "tests.teamlead.no_such_module:STAGE")
    first = run_tl(
        board.path, tmp_path, "--stages", "discovery,adaptation", "--set", "discovery.hub_timeout=2", extra=missing
    )
    assert first.returncode == 0, first.stderr[-2000:]
    # The worker gets the team lead's typed settings: the stage's section and the agents'.
    assert runs_logged(tmp_path, "org/one", 'discovery attempt=1 token=1 settings={"agent_backend": null')
    assert runs_logged(tmp_path, "org/one", '"hub_timeout": 2.0,')
    assert statuses(board)[("org/one", "adaptation")] == "pending"
    assert first.stderr.count("stage adaptation is not runnable") == 1
    assert "not runnable: adaptation" in first.stdout

    broken = ALL.replace("tests.teamlead.toy_stages:ADAPTATION", "tests.teamlead.toy_broken_stage:STAGE")
    second = run_tl(board.path, tmp_path, "--stages", "discovery,adaptation", "--attempts", "1", extra=broken)
    assert second.returncode == 1
    task = next(t for t in board.list_tasks(model_id="org/one") if t.stage == "adaptation")
    assert task.status == "failed" and task.diagnosis["rule"] == "stage_import_error"
    log = Path(attempts(board, "org/one", "adaptation")[0].log_path).read_text()
    assert "Traceback" in log and "toy stage module is broken at import time" in log
    check_event_log(board)


def test_a_spec_change_goes_back_through_healing_then_the_stage_runs_again(board: BoardStore, tmp_path: Path) -> None:
    """A benchmark outcome with a spec change: its attempt fails, the healer gets the finding as a
    directive (a board event), the model rolls back to healing, healing runs with the directive,
    and the benchmark runs again and completes."""
    add_models(board, {"org/island": {"benchmark": "spec_change_once"}})
    run = run_tl(board.path, tmp_path, "--stages", "discovery,adaptation,healing,benchmark", "--attempts", "1")
    assert run.returncode == 0, run.stderr[-3000:]
    st = statuses(board)
    assert st[("org/island", "healing")] == st[("org/island", "benchmark")] == "completed"
    assert [a.outcome for a in attempts(board, "org/island", "benchmark")] == ["sent_back", "completed"]
    assert [a.outcome for a in attempts(board, "org/island", "healing")] == ["completed", "completed"]
    (directive,) = board.events_of_kind("directive", "org/island")
    assert directive.stage == "healing" and directive.data["from_stage"] == "benchmark"
    assert directive.data["finding"] == {"module_class": "Toy"}
    kinds = [(e.kind, e.stage) for e in board.list_events(model_id="org/island", limit=1000)]
    assert ("rollback", "healing") in kinds and ("rollback", "benchmark") in kinds
    log = (tmp_path / "adaptations" / board.get_model("org/island").adaptation_name / "runs.log").read_text()
    assert log.count("healing attempt=") == 2 and 'healing directives=[{"finding": {"module_class": "Toy"}' in log
    assert "sent back to healing: toy needs a spec change" in run.stdout + run.stderr
