"""The ETA: per-stage medians applied to the work left, recomputed as running tasks age."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

from ascendbridge.board import BoardStore, Registration, TaskRecord
from ascendbridge.runtime.devices import detect
from ascendbridge.runtime.placement import DevicePool
from ascendbridge.teamlead.eta import concurrency, estimate
from ascendbridge.teamlead.progress import overall
from ascendbridge.teamlead.scheduler import RunStats
from ascendbridge.teamlead.settings import TeamLeadSettings
from tests.support.fake_devices import FAKE_NPU_SMI_8X64, FAKE_NVIDIA_SMI_2X, fake_runner

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


def test_timed_stages_divide_by_the_pools_timed_slots_not_the_workers(tmp_path: Path) -> None:
    """8 workers: discovery runs 8 at a time everywhere, benchmark only as many as there are
    devices (8 NPUs, 2 GPUs) or timed core slots (one on a 2-core CPU host)."""
    store = BoardStore.init(tmp_path / "board.db")
    store.register_models([Registration(model_id=f"m{i}") for i in range(4)])
    durations = {"discovery": [10.0], "benchmark": [100.0]}
    settings = TeamLeadSettings(stages=("discovery", "benchmark"), workers=8)
    seen = {}
    for label, inventory in (("npu", detect(None, fake_runner(npu=FAKE_NPU_SMI_8X64), cpus=(0, 1), host="h")),
                             ("cuda", detect(None, fake_runner(nvidia=FAKE_NVIDIA_SMI_2X), cpus=(0, 1), host="h")),
                             ("cpu", detect(None, fake_runner(), cpus=(0, 1), host="h"))):
        lead = SimpleNamespace(store=store, settings=settings, pool=DevicePool(inventory), stats=RunStats())
        _, total, eta = overall(lead, durations)  # type: ignore[arg-type]  # the parts overall() reads
        seen[label] = (total, eta.seconds)
    store.close()
    assert seen == {"npu": (8, 4 * 10 / 8 + 4 * 100 / 8), "cuda": (8, 4 * 10 / 8 + 4 * 100 / 2),
                    "cpu": (8, 4 * 10 / 8 + 4 * 100 / 1)}
    assert concurrency(["benchmark", "healing"], 8, {"benchmark": 1}, 8) == {"benchmark": 1, "healing": 8}
