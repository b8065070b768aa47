"""Read-only board queries: filter semantics, search, sort, pagination, aggregates, read-only-ness."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from ascendbridge.board import AttemptEnd, AttemptStart, BoardMissingError, BoardStore, NewEvent, Registration
from ascendbridge.board.queries import BoardQueries, QueryError, success_rate
from ascendbridge.stages import UnknownNameError


def finish(
    store: BoardStore,
    model_id: str,
    stage: str,
    ok: bool,
    seconds: float,
    reason: str = "",
    figures: tuple[dict, ...] = (),
) -> None:
    task = next(t for t in store.list_tasks(stage, model_id=model_id))
    claimed = store.claim_task(task.id, "agent-x", 60)
    attempt = store.start_attempt(claimed.id, claimed.fencing_token, AttemptStart("cmd", ""))
    store.finish_attempt(attempt, AttemptEnd("passed" if ok else "failed", 0 if ok else 1, seconds))
    if ok:
        store.complete_task(claimed.id, claimed.fencing_token, {}, figures=figures)
    else:
        store.fail_task(claimed.id, claimed.fencing_token, {"summary": reason})


@pytest.fixture()
def queries(board: BoardStore) -> BoardQueries:
    board.register_models(
        [
            Registration(model_id="a/one", description="first_model 100%", priority=3),
            Registration(model_id="b/two", description="second", priority=7),
            Registration(model_id="c/three", description="third", priority=5),
        ]
    )
    board.update_model_metadata("a/one", {"task_family": "causal_lm"}, {})
    board.update_model_metadata("b/two", {"task_family": "causal_lm"}, {})
    # Figures reach the board only with a completion (the seeds carry a speedup on two of them).
    finish(board, "a/one", "discovery", True, 2.0, figures=({"values": {"speedup": 1.5}},))
    finish(board, "a/one", "adaptation", True, 4.0, figures=({"values": {"speedup": 3.0}},))  # the latest counts
    finish(board, "b/two", "discovery", False, 1.0, "gated model: no HF_TOKEN")
    q = BoardQueries(board.path)
    yield q
    q.close()


def ids(page) -> list[str]:  # type: ignore[no-untyped-def]
    return [row.model_id for row in page.items]


def test_filters_have_documented_semantics(queries: BoardQueries) -> None:
    assert ids(queries.search_models(stage="discovery", status="completed")) == ["a/one"]
    assert ids(queries.search_models(stage="healing")) == ["a/one"]  # currently at healing
    assert ids(queries.search_models(stage="discovery")) == ["b/two", "c/three"]
    assert ids(queries.search_models(status="failed")) == ["b/two"]
    assert queries.search_models(stage="healing").total == 1


def test_search_covers_id_description_and_failure_reason(queries: BoardQueries) -> None:
    assert ids(queries.search_models(q="HF_TOKEN")) == ["b/two"]
    assert ids(queries.search_models(q="THREE")) == ["c/three"]
    assert ids(queries.search_models(q="100%")) == ["a/one"]
    assert ids(queries.search_models(q="first_")) == ["a/one"]
    assert ids(queries.search_models(q="o_e")) == []  # "_" is literal: "a/one" must not match
    row = queries.search_models(q="b/two").items[0]
    assert (row.current_stage, row.current_status, row.failure_reason) == (
        "discovery",
        "failed",
        "gated model: no HF_TOKEN",
    )


def test_sort_and_paginate(queries: BoardQueries) -> None:
    assert ids(queries.search_models()) == ["b/two", "c/three", "a/one"]
    assert ids(queries.search_models(sort="model_id", descending=False)) == ["a/one", "b/two", "c/three"]
    assert ids(queries.search_models(sort="stage", descending=True))[0] == "a/one"
    page = queries.search_models(sort="model_id", descending=False, per_page=2, page=2)
    assert ids(page) == ["c/three"] and page.total == 3 and page.pages == 2
    assert ids(queries.search_models(page=9)) == []


@pytest.mark.parametrize(
    "kwargs,error",
    [
        ({"stage": "nowhere"}, UnknownNameError),
        ({"status": "done"}, UnknownNameError),
        ({"sort": "description; DROP TABLE models"}, QueryError),
        ({"page": 0}, QueryError),
        ({"per_page": 201}, QueryError),
    ],
)
def test_bad_parameters_raise_clear_errors(queries: BoardQueries, kwargs: dict, error: type) -> None:
    with pytest.raises(error):
        queries.search_models(**kwargs)


def test_reports_and_counts(queries: BoardQueries) -> None:
    rep = queries.reports()
    assert success_rate(rep.success_by_stage["discovery"]) == 0.5
    assert success_rate(rep.success_by_stage["benchmark"]) is None
    assert success_rate(rep.success_by_family["causal_lm"]["discovery"]) == 0.5
    assert rep.success_by_family["unknown"]["discovery"] == {"pending": 1}
    discovery = next(d for d in rep.durations if d.stage == "discovery")
    assert (discovery.attempts, discovery.median_s, discovery.total_s) == (2, 1.5, 3.0)
    assert rep.speedups == [("a/one", 3.0)]
    counts = queries.counts()
    assert counts["models"] == 3
    assert ("discovery", "passed", 1, 2.0) in counts["attempts"]
    assert queries.last_event_id() == counts["last_event_id"] > 0


def test_connection_is_read_only(queries: BoardQueries, board: BoardStore) -> None:
    with pytest.raises(OperationalError):
        with queries._read() as conn:
            conn.execute(text("DELETE FROM models"))
    assert len(board.list_models()) == 3


def test_missing_board_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BoardMissingError, match="no board at"):
        BoardQueries(tmp_path / "absent.db")


def test_bulk_events_are_all_or_nothing(board: BoardStore) -> None:
    """BoardStore.add_events (added for the dashboard bench's 100,000-event board); add_event is one of them."""
    board.register_models([Registration(model_id="e/one")])
    before = len(board.list_events(limit=10**6))
    hello = NewEvent("note", "hello", "e/one", "benchmark", {"n": 1}, origin="bench")
    assert board.add_events([hello, NewEvent("note", "global")]) == 2
    events = board.list_events(limit=10**6)
    assert len(events) == before + 2
    assert (events[-2].model_id, events[-2].stage, events[-2].origin, events[-2].data) == (
        "e/one",
        "benchmark",
        "bench",
        {"n": 1},
    )
    assert (events[-1].model_id, events[-1].origin) == (None, "system")
    with pytest.raises(Exception, match="unknown model 'e/none'"):
        board.add_events([NewEvent("note", "ok", "e/one"), NewEvent("note", "bad", "e/none")])
    with pytest.raises(UnknownNameError):
        board.add_events([NewEvent("note", "ok", "e/one"), NewEvent("note", "bad", "e/one", "deploy")])
    with pytest.raises(UnknownNameError):  # one event is checked as many are
        board.add_event(NewEvent("note", "bad", "e/one", "deploy"))
    assert len(board.list_events(limit=10**6)) == before + 2


def test_cached_answers_follow_every_board_change(queries: BoardQueries, board: BoardStore) -> None:
    assert ids(queries.search_models())[0] == "b/two"
    assert queries.status_counts()["discovery"]["pending"] == 1
    board.set_priority("a/one", 99, origin="test")
    assert ids(queries.search_models())[0] == "a/one"
    board.retry("b/two", "discovery")
    assert queries.status_counts()["discovery"]["pending"] == 2
    assert queries.search_models(q="b/two").items[0].current_status == "pending"
