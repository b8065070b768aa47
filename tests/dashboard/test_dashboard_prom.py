"""/metrics as Prometheus reads it: parsed by prometheus_client's own parser, over a real board."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from ascendbridge.board import AttemptEnd, AttemptStart, BoardStore, Registration
from ascendbridge.board.queries import BoardQueries
from dashboard.prom import render


def scrape(board: BoardStore) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value, of one scrape parsed as Prometheus parses it."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(render_counts(board))
        for sample in family.samples
    }


def test_values_are_exact_at_any_size() -> None:
    """`{value:g}` wrote 1234567 as 1.23457e+06: six significant digits, a different number."""
    counts = {"models": 1234567, "tasks": [], "attempts": [("benchmark", "passed", 7654321, 0.1 + 0.2)]}
    text = render({**counts, "agents": [], "guidance": [], "last_event_id": 987654321})
    samples = {
        (s.name, tuple(sorted(s.labels.values()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }
    assert samples[("ascendbridge_models", ())] == 1234567
    assert samples[("ascendbridge_attempts_total", ("benchmark", "passed"))] == 7654321
    assert samples[("ascendbridge_attempt_duration_seconds_sum", ("benchmark",))] == 0.1 + 0.2
    assert samples[("ascendbridge_last_event_id", ())] == 987654321


def test_running_attempts_are_a_gauge_and_the_attempts_counter_never_decreases(board: BoardStore) -> None:
    board.register_models([Registration(model_id="acme/one"), Registration(model_id="acme/two")])
    for model_id in ("acme/one", "acme/two"):  # one finished discovery attempt each: the counter is at 2
        task = board.claim_task(board.list_tasks("discovery", model_id=model_id)[0].id, "w", 60)
        attempt = board.start_attempt(task.id, task.fencing_token, AttemptStart("cmd", ""))
        board.finish_attempt(attempt, AttemptEnd("passed", 0, 1.5))
        board.complete_task(task.id, task.fencing_token, {})
    task = board.claim_task(board.list_tasks("adaptation", model_id="acme/one")[0].id, "w", 60)
    attempt = board.start_attempt(task.id, task.fencing_token, AttemptStart("cmd", ""))

    counter, running = "ascendbridge_attempts_total", "ascendbridge_attempts_running"
    before = scrape(board)
    assert before[(running, (("stage", "adaptation"),))] == 1
    assert before[(counter, (("outcome", "passed"), ("stage", "discovery")))] == 2
    assert not any(name == counter and dict(labels)["stage"] == "adaptation" for name, labels in before)

    board.finish_attempt(attempt, AttemptEnd("passed", 0, 2.0))
    board.complete_task(task.id, task.fencing_token, {})
    after = scrape(board)
    assert after[(running, (("stage", "adaptation"),))] == 0
    assert after[(counter, (("outcome", "passed"), ("stage", "adaptation")))] == 1
    for key, value in before.items():  # every counter series still there, none lower
        if key[0] == counter:
            assert after[key] >= value, key
    families = {f.name: f.type for f in text_string_to_metric_families(render_counts(board))}
    assert families["ascendbridge_attempts"] == "counter" and families["ascendbridge_attempts_running"] == "gauge"
    assert families["ascendbridge_attempt_duration_seconds"] == "summary"


def render_counts(board: BoardStore) -> str:
    queries = BoardQueries(board.path)
    try:
        return render(queries.counts())
    finally:
        queries.close()
