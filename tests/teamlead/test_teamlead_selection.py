"""The dispatch policy as a pure function: readiness and resources, not stage order."""

from __future__ import annotations

from typing import Any

from ascendbridge.teamlead.selection import Candidate, Resources, select


def _free(workers: int = 2, timed: int = 1, capacity: int = 1, **kw: Any) -> Resources:
    return Resources(workers=workers, timed=timed, timed_capacity=capacity, **kw)


def _picked(cands: list[Candidate], free: Resources) -> list[tuple[int, str]]:
    return [(c.model_pk, c.stage) for c in select(cands, free)]


def test_a_free_timed_slot_takes_a_ready_timed_task_before_any_preparation() -> None:
    ready = [Candidate(1, 1, "discovery"), Candidate(2, 2, "healing"), Candidate(3, 3, "benchmark")]
    # Stage order would start discovery and healing and leave the timed slot idle.
    assert _picked(ready, _free()) == [(3, "benchmark"), (1, "discovery")]
    # No timed slot free: preparation takes every worker, the earlier model first.
    assert _picked(ready, _free(timed=0)) == [(1, "discovery"), (2, "healing")]


def test_first_come_first_served_by_model_so_no_stage_is_starved() -> None:
    # A model's business benchmark goes before a later model's optimization...
    ready = [Candidate(1, 1, "business_benchmark"), Candidate(2, 2, "optimization"), Candidate(3, 3, "benchmark")]
    assert _picked(ready, _free(workers=4, timed=3, capacity=3)) == [
        (1, "business_benchmark"),
        (2, "optimization"),
        (3, "benchmark"),
    ]
    assert _picked(ready, _free()) == [(1, "business_benchmark")]
    # ...and a chain's head (training, the first timed stage) is not starved behind the later
    # stages of models registered after it (ranking the later stage first did exactly that).
    late_head = [Candidate(4, 4, "serving"), Candidate(5, 2, "training"), Candidate(6, 3, "business_benchmark")]
    assert _picked(late_head, _free()) == [(2, "training")]


def test_priority_before_registration() -> None:
    ready = [
        Candidate(1, 5, "benchmark"),
        Candidate(2, 4, "business_benchmark"),
        Candidate(3, 9, "benchmark", priority=2),
        Candidate(4, 1, "discovery"),
        Candidate(5, 2, "discovery"),
    ]
    assert _picked(ready, _free(workers=3)) == [(9, "benchmark"), (1, "discovery"), (2, "discovery")]
    assert _picked(ready, _free(workers=3, timed=2, capacity=2)) == [
        (9, "benchmark"),
        (4, "business_benchmark"),
        (1, "discovery"),
    ]
    assert _picked(ready, _free(workers=4, timed=3, capacity=3)) == [
        (9, "benchmark"),
        (4, "business_benchmark"),
        (5, "benchmark"),
        (1, "discovery"),
    ]


def test_the_model_with_the_most_work_first_after_priority() -> None:
    """The longest model first (its rank is the model's, so a shorter model's later stage still
    waits), an undiscovered model (infinite: its discovery tells its family) before any, registration
    between equals, and priority before all of it."""
    ready = [
        Candidate(1, 1, "business_benchmark", work_s=300.0),
        Candidate(2, 2, "benchmark", work_s=900.0),
        Candidate(3, 3, "benchmark", work_s=300.0),
    ]
    assert _picked(ready, _free(workers=3, timed=3, capacity=3)) == [
        (2, "benchmark"),
        (1, "business_benchmark"),
        (3, "benchmark"),
    ]
    assert _picked([*ready, Candidate(4, 4, "benchmark", priority=1, work_s=10.0)], _free()) == [(4, "benchmark")]
    preparing = [Candidate(5, 5, "healing", work_s=900.0), Candidate(6, 6, "discovery", work_s=float("inf"))]
    assert _picked(preparing, _free(workers=1)) == [(6, "discovery")]


def test_busy_models_stage_caps_and_free_workers_hold() -> None:
    ready = [Candidate(1, 1, "healing"), Candidate(2, 2, "healing"), Candidate(3, 3, "discovery")]
    assert _picked(ready, _free(workers=3, busy_models=frozenset({1}))) == [(2, "healing"), (3, "discovery")]
    assert _picked(ready, _free(workers=3, running={"healing": 1}, limits={"healing": 2})) == [
        (1, "healing"),
        (3, "discovery"),
    ]
    assert _picked(ready, _free(workers=1)) == [(1, "healing")]
    assert _picked(ready, _free(workers=0)) == []


def test_a_sharded_model_waits_for_its_devices_and_one_too_big_is_returned_to_be_blocked() -> None:
    ready = [Candidate(1, 1, "benchmark", devices=2), Candidate(2, 2, "benchmark")]
    assert _picked(ready, _free(workers=4, timed=1, capacity=4)) == [(2, "benchmark")]
    assert _picked(ready, _free(workers=4, timed=2, capacity=4)) == [(1, "benchmark")]
    too_big = [Candidate(1, 1, "benchmark", devices=8)]
    assert _picked(too_big, _free(workers=4, timed=1, capacity=4)) == [(1, "benchmark")]


def test_a_due_gate_recheck_goes_first_and_a_waiting_one_keeps_a_worker() -> None:
    ready = [Candidate(1, 1, "benchmark"), Candidate(2, 2, "benchmark", recheck=True)]
    assert _picked(ready, _free()) == [(2, "benchmark")]
    prep = [Candidate(1, 1, "discovery"), Candidate(2, 2, "adaptation")]
    # A re-check waiting for its backoff keeps one worker (and its timed slot) from preparation...
    assert _picked(prep, _free(reserved=1)) == [(1, "discovery")]
    # ...but not when no timed slot is free for it anyway.
    assert _picked(prep, _free(timed=0, reserved=1)) == [(1, "discovery"), (2, "adaptation")]


def test_idle_preparation_cores_are_lent_to_a_timed_task_only_when_nothing_prepares() -> None:
    timed = [Candidate(1, 1, "optimization"), Candidate(2, 2, "benchmark")]
    # Nothing to prepare: the second timed task takes the lent preparation cores.
    assert _picked(timed, _free(lendable=1)) == [(1, "optimization"), (2, "benchmark")]
    # A preparation task is ready: it gets the preparation cores, nothing is lent.
    assert _picked([*timed, Candidate(3, 3, "healing")], _free(lendable=1)) == [(1, "optimization"), (3, "healing")]
    # Lent: preparation waits for the timed task on those cores to end.
    assert _picked([Candidate(3, 3, "healing")], _free(timed=0, preparing=False)) == []
    # A sharded model's task never takes the lent cores as one of its devices.
    assert _picked([Candidate(1, 1, "benchmark", devices=2)], _free(timed=1, capacity=2, lendable=1)) == []
