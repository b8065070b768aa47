"""The Ray executor on a real two-node Ray cluster on this machine (4 fake NPU slots, CPU only).

Models go through five stages (tests/teamlead/toy_stages.py; two of them timed) as Ray tasks; the second node is
SIGKILLed while it runs a timed one. The event log must show no two timed attempts overlapping on one NPU slot,
the visible-device variable Ray set for each, the lost task returned to pending and every task
completed exactly once. The ray extra is part of the test environment (run_tests.sh installs it):
without it these tests fail, they do not skip.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from ascendbridge.board import BoardStore
from ascendbridge.workers.artefact import Artefact, ArtefactError, pack, unpack
from ascendbridge.workers.payload import PayloadError, WorkerJob, load
from ascendbridge.workers.placement import TIMED_STAGES
from ascendbridge.workers.ray_executor import RAY_MISSING
from bench.support.ray_cluster import LocalRayCluster, _free_port
from tests.teamlead.tl_support import add_models, check_event_log, run_tl, start_tl, statuses, wait_for

STAGES = "discovery,adaptation,healing,benchmark,optimization"  # the toy stages (tests/teamlead/toy_stages.py)
MODELS = {f"org/ray-{i}": {"benchmark": "sleep:3", "optimization": "sleep:2"} for i in range(2)}


def test_ray_extra_is_installed() -> None:
    import ray  # the test environment carries the extra; a missing one must fail the suite, not skip

    assert ray.__version__


def test_packed_directory_travels_without_venv_and_is_checked(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "weights").mkdir(parents=True)
    (src / "weights" / "a.bin").write_bytes(b"\x00" * 1000)
    (src / "demo.py").write_text("print('hi')\n")
    (src / ".venv" / "bin").mkdir(parents=True)
    (src / ".venv" / "bin" / "python").write_text("head's interpreter")
    target = tmp_path / "dst"
    (target / ".venv").mkdir(parents=True)
    (target / ".venv" / "kept").write_text("node's own env")
    (target / "stale.txt").write_text("from an earlier state")
    artefact = pack(src)
    tampered = Artefact(artefact.data[:-1] + bytes([artefact.data[-1] ^ 1]), artefact.sha256)
    with pytest.raises(ArtefactError, match="sha256"):
        unpack(tampered, target)
    assert (target / "stale.txt").exists() and not (target / "demo.py").exists()  # untouched
    unpack(artefact, target)
    assert sorted(p.name for p in target.iterdir()) == [".venv", "demo.py", "weights"]
    assert (target / "weights" / "a.bin").read_bytes() == b"\x00" * 1000
    assert (target / ".venv" / "kept").exists() and not (target / ".venv" / "bin").exists()


def test_executor_errors_are_one_line_and_touch_nothing(board: BoardStore, tmp_path: Path) -> None:
    add_models(board, {"org/never": {}})
    unreachable = run_tl(
        board.path,
        tmp_path,
        "--stages",
        STAGES,
        "--executor",
        "ray",
        "--ray-address",
        f"127.0.0.1:{_free_port()}",
        timeout=120,
    )
    assert unreachable.returncode == 2, unreachable.stderr[-2000:]
    assert "error: cannot reach the Ray cluster at 127.0.0.1:" in unreachable.stderr
    no_ray = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['ray'] = None; from ascendbridge.teamlead.cli import main; "
            f"sys.exit(main(['--board', {str(board.path)!r}, '--executor', 'ray', '--plain']))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert no_ray.returncode == 2, no_ray.stderr[-2000:]
    assert no_ray.stderr.strip().splitlines()[-1] == f"error: {RAY_MISSING}"
    assert set(statuses(board).values()) <= {"pending", "waiting"}  # nothing claimed, nothing half-done


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRayCluster]:
    with LocalRayCluster(npus_per_node=2, cpus_per_node=2).start(nodes=2) as running:
        yield running
    assert running.alive_processes() == [], "ray processes left after teardown"


def _job_stage(path: Path) -> str:
    """The stage of a worker's job file ("" once the node's scratch folder is gone)."""
    try:
        return load(WorkerJob, path, "the job file").stage
    except PayloadError:
        return ""


def _worker_pids(cluster: LocalRayCluster, node: int, stages: set[str]) -> list[int]:
    """Our worker subprocesses running one of `stages` on that node."""
    out = []
    for proc in cluster.tree(node):
        try:
            argv = proc.cmdline()
        except psutil.Error:
            continue
        if "ascendbridge.workers.worker" in argv and _job_stage(Path(argv[argv.index("--job") + 1])) in stages:
            out.append(proc.pid)
    return out


def test_pipeline_on_two_ray_nodes_survives_losing_one(
    cluster: LocalRayCluster, board: BoardStore, tmp_path: Path
) -> None:
    add_models(board, MODELS)
    out = tmp_path / "team-lead.out"
    lead = start_tl(
        board.path,
        tmp_path,
        "--stages",
        STAGES,
        "--workers",
        "6",
        "--executor",
        "ray",
        "--ray-address",
        cluster.address,
        out=out,
    )
    try:
        # Generous bounds, not outcomes: on a loaded 2-core machine a Ray worker takes ~20 s to start.
        wait_for(
            lambda: _worker_pids(cluster, 1, set(TIMED_STAGES)) or lead.poll() is not None,
            timeout=300,
            what="a timed task running on the second node",
        )
        assert lead.poll() is None, out.read_text()[-3000:]
        node2_pids = {p.pid for p in cluster.tree(1)}
        killed_at = time.time()
        cluster.kill_node(1)
        assert lead.wait(timeout=300) == 0, out.read_text()[-3000:]
    finally:
        if lead.poll() is None:
            lead.kill()
    log = out.read_text()
    assert {s for (_, stage), s in statuses(board).items() if stage in STAGES.split(",")} == {"completed"}, log[-3000:]
    completions = check_event_log(board)
    assert set(completions.values()) == {1} and len(completions) == len(MODELS) * 5
    lost = [e for e in board.list_events(limit=10**6) if e.kind == "released" and "was lost" in e.message]
    assert lost, "the killed node's task was not returned to pending"
    placements = [(e.stage, e.data) for e in board.events_of_kind("attempt_placement")]
    assert len(placements) == len(MODELS) * 5  # one per completed attempt; the lost one left none
    slots: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for stage, where in placements:
        npus = where["devices"].get("NPU", [])
        assert (stage in TIMED_STAGES) == bool(npus), (stage, where)  # discovery holds no device
        if npus:
            assert len(npus) == 1 and where["visible_devices"]["ASCEND_RT_VISIBLE_DEVICES"] == npus[0], where
            slots[(where["node_id"], npus[0])].append((where["started"], where["ended"]))
        if where["pid"] in node2_pids:
            assert where["ended"] < killed_at
    assert sum(len(v) for v in slots.values()) == len(MODELS) * 2  # every timed attempt held one NPU
    done = [a for m in MODELS for _, a in board.list_attempts(m) if a.outcome == "completed"]
    assert all(a.cost_profile and {"staging", "process_start", "gate"} <= set(a.cost_profile) for a in done)
    for slot, spans in slots.items():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert start >= end, f"two timed tasks overlapped on {slot}: {spans}"
    for model_id in MODELS:  # the packed directories came back and were promoted on the head
        name = board.get_model(model_id).adaptation_name
        runs = (tmp_path / "adaptations" / name / "runs.log").read_text()
        assert all(f"{stage} attempt=" in runs for stage in STAGES.split(","))
