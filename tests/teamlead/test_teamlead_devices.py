"""Device-aware scheduling in a real team lead: fake inventories (8 NPUs, 2 GPUs, CPU only), real
board, real worker processes. Exclusivity is checked from the event log; what every job was given
is checked from inside the job (its environment, its child's Cpus_allowed_list)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ascendbridge.board import BoardStore, Registration
from ascendbridge.teamlead.cli import main as team_lead_main
from ascendbridge.workers.placement import TIMED_STAGES
from tests.support.fake_devices import FAKE_NPU_SMI_8X64, FAKE_NVIDIA_SMI_2X, install_fake_tools
from tests.teamlead.tl_support import check_event_log, statuses, tl_argv, tl_env
from tests.teamlead.toy_device_stages import RECORD_ENV, STAGES

SKIP = [
    "adaptation",
    "healing",
    "optimization",
    "serving",
]  # discovery (CPU) -> benchmark -> business_benchmark (timed)


def _run(
    board: BoardStore,
    tmp: Path,
    models: dict[str, dict[str, Any]],
    *args: str,
    path: str | None = None,
    returncode: int = 0,
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """A real team lead over `models` on the fleet `path`'s tools show; every task done unless a
    non-zero `returncode` is expected. The jobs' own records of what they were given."""
    board.register_models(
        Registration(model_id=m, source="local", path="/nonexistent", description=json.dumps(d), skip_stages=SKIP)
        for m, d in models.items()
    )
    record = tmp / "device_runs.jsonl"
    env = tl_env(tmp, STAGES)
    env[RECORD_ENV] = str(record)
    env["PATH"] = path or install_fake_tools(tmp / "no-tools")  # no real npu-smi / nvidia-smi leaks in
    for name in ("ASCEND_RT_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ASCENDBRIDGE_DEVICES"):
        env.pop(name, None)
    proc = subprocess.run(
        tl_argv(board.path, "--stages", "discovery,benchmark,business_benchmark", *args),
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == returncode, proc.stderr[-3000:]
    assert returncode or all(st in ("completed", "skipped") for st in statuses(board).values())
    assert all(n == 1 for n in check_event_log(board).values())
    return proc, [json.loads(line) for line in record.read_text().splitlines()]


def _placements(board: BoardStore) -> list[dict[str, Any]]:
    """Replay placed / devices_released: no device is ever held by two attempts; returns the placements."""
    held: dict[str, int] = {}
    placed = []
    for ev in board.list_events(limit=10**9):
        if ev.kind == "placed":
            placed.append({**ev.data, "model": ev.model_id, "stage": ev.stage})
            if ev.data["exclusive"]:
                for device in ev.data["devices"]:
                    assert device not in held, (
                        f"{device} given to attempt {ev.data['attempt_id']} while attempt {held[device]} holds it"
                    )
                    held[device] = ev.data["attempt_id"]
        elif ev.kind == "devices_released":
            for device in ev.data["devices"]:
                assert held.pop(device) == ev.data["attempt_id"]
    assert not held
    return placed


def _by_job(runs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["model"], r["stage"]): r for r in runs}


@pytest.mark.slow  # fast tier: a real team-lead run of a device fleet
def test_eight_npus_one_card_per_timed_task_and_sharded_models_claim_several(board: BoardStore, tmp_path: Path) -> None:
    models = {f"org/m{i}": {} for i in range(3)}
    models["org/big"] = {"plan_devices": 3}
    path = install_fake_tools(tmp_path / "bin", npu_smi=FAKE_NPU_SMI_8X64)
    _, runs = _run(board, tmp_path, models, "--workers", "8", path=path)
    placed = _placements(board)
    jobs = _by_job(runs)
    timed = [p for p in placed if p["stage"] in TIMED_STAGES]
    assert len(timed) == 8 and all(p["exclusive"] and p["host"] == placed[0]["host"] for p in timed)
    assert len({d for p in timed for d in p["devices"]}) >= 2  # spread over the cards, not all on npu:0
    for p in timed:
        env = jobs[(p["model"], p["stage"])]["env"]
        indices = ",".join(d.split(":")[1] for d in p["devices"])
        assert len(p["devices"]) == (3 if p["model"] == "org/big" else 1)
        if p["stage"] == "benchmark":  # profiled in the same process: no mask (CANN), its physical index
            assert env["ASCENDBRIDGE_NPU_INDEX"] == indices and env["ASCEND_RT_VISIBLE_DEVICES"] is None
        else:
            assert env["ASCEND_RT_VISIBLE_DEVICES"] == indices and env["ASCENDBRIDGE_NPU_INDEX"] is None
    for p in placed:
        if p["stage"] == "discovery":
            assert p["devices"] == [] and not p["exclusive"]
            assert jobs[(p["model"], "discovery")]["env"]["ASCEND_RT_VISIBLE_DEVICES"] is None
    found = board.list_host_devices()
    assert [d.label for d in found] == [f"npu:{i}" for i in range(8)] and {d.memory_gb for d in found} == {64.0}
    assert found[0].source == "npu-smi"
    bench = [a for _, a in board.list_attempts("org/big", "benchmark")]
    assert bench[0].devices.count("npu:") == 3 and bench[0].host == placed[0]["host"]


@pytest.mark.slow  # fast tier: a real team-lead run of a device fleet
def test_two_gpus_each_timed_job_sees_only_its_card(board: BoardStore, tmp_path: Path) -> None:
    path = install_fake_tools(tmp_path / "bin", nvidia_smi=FAKE_NVIDIA_SMI_2X)
    _, runs = _run(board, tmp_path, {f"org/g{i}": {} for i in range(2)}, "--workers", "4", path=path)
    jobs = _by_job(runs)
    timed = [p for p in _placements(board) if p["stage"] in TIMED_STAGES]
    assert len(timed) == 4
    for p in timed:
        assert jobs[(p["model"], p["stage"])]["env"]["CUDA_VISIBLE_DEVICES"] == p["devices"][0].split(":")[1]
    assert {d.label for d in board.list_host_devices()} == {"cuda:0", "cuda:1"}


@pytest.mark.slow  # fast tier: a real team-lead run of a device fleet
def test_a_model_needing_more_cards_than_the_host_has_is_blocked_and_the_run_exits_1(
    board: BoardStore, tmp_path: Path
) -> None:
    """Blocked before any attempt starts (no device could ever hold it), and the exit code says a
    task was blocked in this run (it said 0 when the block came before an attempt)."""
    path = install_fake_tools(tmp_path / "bin", nvidia_smi=FAKE_NVIDIA_SMI_2X)
    models = {"org/fits": {}, "org/huge": {"plan_devices": 3}}
    proc, runs = _run(board, tmp_path, models, "--workers", "2", path=path, returncode=1)
    assert statuses(board)[("org/fits", "business_benchmark")] == "completed"
    assert statuses(board)[("org/huge", "benchmark")] == "blocked"
    [task] = [t for t in board.list_tasks(model_id="org/huge") if t.stage == "benchmark"]
    assert task.diagnosis["rule"] == "not_enough_devices", task.diagnosis
    assert (task.diagnosis["devices_needed"], task.diagnosis["host_slots"]) == (3, 2)
    assert "needs 3 cuda device(s) at once; this host has 2 timed slot(s)" in proc.stderr, proc.stderr[-3000:]
    assert task.diagnosis["retryable"] is False and "--devices" in task.diagnosis["remedy"]
    assert "(refusal, not retried; remedy: run it on a host with that many timed slots" in proc.stderr
    assert [(r["model"], r["stage"]) for r in runs if r["model"] == "org/huge"] == [("org/huge", "discovery")]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="isolating timed runs needs two cores")
@pytest.mark.slow  # fast tier: a real team-lead run of a device fleet
def test_cpu_only_host_gives_timed_runs_their_own_cores(board: BoardStore, tmp_path: Path) -> None:
    """The defaults of ./run_auto_team_lead.sh on this CPU-only machine: no --devices, 2 workers."""
    _, runs = _run(board, tmp_path, {f"org/c{i}": {} for i in range(2)})
    placed = _placements(board)
    jobs = _by_job(runs)
    timed_cores = {c for p in placed if p["exclusive"] for c in p["cpus"]}
    prep_cores = {c for p in placed if not p["exclusive"] for c in p["cpus"]}
    assert timed_cores and prep_cores
    for p in placed:  # a process the job started is confined to the job's cores
        seen = jobs[(p["model"], p["stage"])]["child_cpus"]
        assert _cores(seen) == set(p["cpus"]), (p, seen)
    # A timed job's cores are its own while it runs: the preparation cores only once nothing prepares.
    for timed in (p for p in placed if p["exclusive"]):
        t = jobs[(timed["model"], timed["stage"])]
        for other in (p for p in placed if p is not timed and set(p["cpus"]) & set(timed["cpus"])):
            o = jobs[(other["model"], other["stage"])]
            assert o["ended"] <= t["started"] or o["started"] >= t["ended"], (timed, other)
    rows = board.list_host_devices()
    assert [r.kind for r in rows] == ["cpu"] and set(rows[0].cpus) == set(os.sched_getaffinity(0))


def test_bad_devices_is_one_line_and_exit_2(
    board: BoardStore, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", install_fake_tools(tmp_path / "bin", npu_smi=FAKE_NPU_SMI_8X64))
    for spec, why in (
        ("npu:0-x", "is not an index or a range"),
        ("npu:7-9", "npu:8,9 not found by npu-smi"),
        ("tpu:0", "expected npu:LIST"),
    ):
        assert team_lead_main(["--board", str(board.path), "--devices", spec]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: --devices") and why in err, err
    assert board.list_host_devices() == [] and not board.list_agents()  # nothing written


def _cores(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out
