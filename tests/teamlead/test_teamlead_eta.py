"""The ETA: per-stage medians applied to the work left, recomputed as running tasks age."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ascendbridge.board import TaskRecord
from ascendbridge.teamlead.eta import estimate

NOW = datetime(2026, 12, 1, 7, 0, 0, tzinfo=timezone.utc)


def task(stage: str, status: str, started_s_ago: float | None = None, n: int = 1) -> TaskRecord:
    started = (NOW - timedelta(seconds=started_s_ago)).isoformat() if started_s_ago is not None else None
    return TaskRecord(id=n, model_pk=n, model_id=f"m{n}", adaptation_name=f"m{n}", priority=0, stage=stage,
                      status=status, attempts=1, fencing_token=1, started_at=started, updated_at=NOW.isoformat())


def test_eta_sums_stage_medians_over_workers_and_says_its_basis() -> None:
    tasks = [task("discovery", "completed", n=1), task("healing", "pending", n=2), task("healing", "pending", n=3),
             task("benchmark", "pending", n=2), task("benchmark", "pending", n=3)]
    durations = {"discovery": [2.0, 4.0, 3.0], "healing": [30.0, 50.0, 40.0], "benchmark": [120.0]}
    eta = estimate(tasks, ["discovery", "healing", "benchmark"], durations,
                   {"discovery": 2, "healing": 2, "benchmark": 1}, NOW)
    assert eta.seconds == 2 * 40.0 / 2 + 2 * 120.0  # healing in parallel, benchmark one at a time
    assert eta.text() == ("ETA 4m40s [healing 40s x2 (median of 3), benchmark 2m00s x2 (median of 1)]")


def test_eta_counts_down_while_a_task_runs_and_flags_unmeasured_stages() -> None:
    durations = {"healing": [60.0]}
    stages, workers = ["healing", "benchmark"], {"healing": 1, "benchmark": 1}
    fresh = estimate([task("healing", "in_progress", 10)], stages, durations, workers, NOW)
    later = estimate([task("healing", "in_progress", 40)], stages, durations, workers, NOW)
    assert (fresh.seconds, later.seconds) == (50.0, 20.0)  # not frozen between completions
    overdue = estimate([task("healing", "in_progress", 90)], stages, durations, workers, NOW)
    assert overdue.seconds == 0.0
    partial = estimate([task("healing", "pending", n=1), task("benchmark", "pending", n=1)], stages, durations,
                       workers, NOW)
    assert partial.partial and partial.text() == (
        "ETA >=1m00s [healing 1m00s x1 (median of 1), benchmark ? x1 (no sample yet)]")
    nothing = estimate([task("benchmark", "pending")], stages, {}, workers, NOW)
    assert nothing.seconds is None and nothing.text() == "ETA ? [benchmark ? x1 (no sample yet)]"
    assert estimate([task("healing", "completed")], stages, durations, workers, NOW).text() == "ETA 0s"
