"""Chaos: kill the team lead, a worker, a stage's grandchild at seeded random moments; check
that nothing of the killed attempt survives, no task is lost or completed twice, and every
adaptation directory is either its previous good state or its new gated state.

Real board, real subprocesses, a real uv environment (tests/chaos/chaos_stages.py); the longer
scenario with many kills is bench/chaos_bench.py.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore, Registration
from ascendbridge.naming import base_adaptation_name
from ascendbridge.teamlead.lock import lock_path_for
from ascendbridge.workers.attempt_dir import discard, staging_dir
from ascendbridge.workers.containment import marker_for
from ascendbridge.workers.payload import write
from tests.chaos.chaos_stages import PARTS, STAGES
from tests.teamlead.tl_support import FAST, alive, check_event_log, claimed_job, statuses, tl_env, wait_for

pytestmark = pytest.mark.slow  # fast tier: kills real team-lead runs

ATTEMPT_ENV = "ASCENDBRIDGE_ATTEMPT"


def marked() -> dict[int, str]:
    """pid -> attempt marker of every live process of ours that carries one (read from /proc)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for item in env:
            if item.startswith(ATTEMPT_ENV.encode() + b"=") and alive(int(entry.name)):
                out[int(entry.name)] = item.split(b"=", 1)[1].decode()
    return out


def survivors(marker: str) -> list[int]:
    return [pid for pid, m in marked().items() if m == marker]


def described(pid: int) -> str:
    """pid, state, parent and command line of a live process, for a failure message."""
    try:
        state, parent = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[:2]
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return f"{pid} (gone)"
    return f"{pid} {state} parent {parent}: {command[:120]}"


def wait_gone(markers: set[str], timeout: float, what: str) -> None:
    """Wait until no live process carries one of `markers`; past `timeout`, fail naming the survivors
    (a containment leak reads differently from a host too slow to finish the kill)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not set(marked().values()) & markers:
            return
        time.sleep(0.2)
    left = [described(pid) for pid, m in marked().items() if m in markers]
    raise AssertionError(f"{what}: still alive after {timeout:.0f} s: {left}")


def loop_pids(tmp: Path) -> list[int]:
    folder = tmp / "pids"
    return [int(p.name.split(".")[0]) for p in folder.glob("*.loop")] if folder.is_dir() else []


def env_for(tmp: Path, **extra: str) -> dict[str, str]:
    return {**tl_env(tmp, STAGES), "CHAOS_PIDS": str(tmp / "pids"), **extra}


def start_lead(board: Path, tmp: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "ascendbridge.teamlead", "--board", str(board), *FAST, "--stages", "discovery", *args]
    return subprocess.Popen(
        argv,
        env=env_for(tmp, **env),
        stdout=(tmp / "lead.out").open("a"),
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def register(board: BoardStore, behaviours: dict[str, dict[str, object]]) -> None:
    board.register_models(
        Registration(model_id=m, source="local", path="/nonexistent", description=json.dumps(b))
        for m, b in behaviours.items()
    )


def attempt_of_first_loop(tmp: Path) -> tuple[int, str]:
    """The first timed-loop grandchild that started, and the marker of its attempt."""
    wait_for(lambda: any(p in marked() for p in loop_pids(tmp)), 90, what="a stage's grandchild")
    pid = next(p for p in loop_pids(tmp) if p in marked())
    return pid, marked()[pid]


def assert_gated_or_previous(tmp: Path, model_id: str, previous: set[str] | None) -> None:
    """The adaptation directory holds one complete generation (or the previous state, or nothing)."""
    state = tmp / "adaptations" / base_adaptation_name(model_id) / "state"
    parts = sorted(state.glob("part-*.txt")) if state.is_dir() else []
    generations = {p.read_text() for p in parts}
    if previous is None and not parts:
        return
    assert len(parts) == PARTS and len(generations) == 1, f"half-written {state}: {generations}"
    assert previous is None or generations == previous or len(generations) == 1


def assert_no_loss_no_duplicates(board: BoardStore) -> None:
    completions = check_event_log(board)
    assert all(n == 1 for n in completions.values()), completions
    assert {s for s in statuses(board).values()} <= {"completed", "waiting", "pending", "failed"}


def test_sigkilled_team_lead_leaves_no_process_and_the_watchdog_finishes_the_work(
    board: BoardStore, tmp_path: Path
) -> None:
    rng = random.Random(19)
    register(board, {"org/a": {"hold": 0.5}, "org/b": {"hold": 0.5}})
    dog = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ascendbridge.teamlead.watchdog",
            "--board",
            str(board.path),
            "--check-every",
            "0.5",
            "--stale-after",
            "60",
            "--",
            *FAST,
            "--stages",
            "discovery",
        ],
        env=env_for(tmp_path),
        stdout=(tmp_path / "dog.out").open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        loop, marker = attempt_of_first_loop(tmp_path)
        time.sleep(rng.uniform(0.2, 1.5))  # somewhere in the timed loop
        lead_pid = int(lock_path_for(board.path).read_text())
        os.kill(lead_pid, signal.SIGKILL)
        wait_gone({marker}, 30, f"every process of attempt {marker} to die")
        name = base_adaptation_name("org/a")
        assert_gated_or_previous(tmp_path, "org/a", None)
        assert_gated_or_previous(tmp_path, "org/b", None)
        wait_for(
            lambda: all(s == "completed" for (_, st), s in statuses(board).items() if st == "discovery"),
            120,
            what="the restarted team lead to finish both models",
        )
        for model in ("org/a", "org/b"):
            assert_gated_or_previous(tmp_path, model, None)
        assert not list((tmp_path / "adaptations" / ".attempts").glob(f"{name}.*/{name}/state"))
    finally:
        dog.send_signal(signal.SIGTERM)
        dog.wait(timeout=60)
    assert not [p for p, m in marked().items() if m.endswith("@" + str(board.path.resolve()))]
    assert_no_loss_no_duplicates(board)
    kinds = [e.kind for e in board.list_events(limit=10**6)]
    assert "released" in kinds or "lease_expired" in kinds  # the killed attempt was not counted as done


def test_killed_worker_during_uv_sync_and_killed_grandchild_leave_nothing_behind(
    board: BoardStore, tmp_path: Path
) -> None:
    rng = random.Random(7)
    register(board, {"org/uv": {"uv": True, "hold": 0.2}, "org/grand": {"hold": 0.4}})
    lead = start_lead(board.path, tmp_path, "--workers", "2")
    try:
        wait_for(lambda: list((tmp_path / "pids").glob("*.uv")), 120, interval=0.02, what="uv sync to start")
        worker = int(next((tmp_path / "pids").glob("*.uv")).name.split(".")[0])
        uv_marker = marked()[worker]
        time.sleep(rng.uniform(0.0, 0.2))  # during uv sync (or just after it)
        os.kill(worker, signal.SIGKILL)
        wait_gone({uv_marker}, 30, "uv sync and its children to die with their worker")
        # A grandchild of the other model: kill its timed loop; its escaped child must not outlive it.
        grand = base_adaptation_name("org/grand")

        def grand_loop() -> list[int]:
            out = []
            for pid in loop_pids(tmp_path):
                try:
                    if grand in os.readlink(f"/proc/{pid}/cwd") and alive(pid):
                        out.append(pid)
                except OSError:
                    pass
            return out

        wait_for(grand_loop, 60, what="the timed loop of org/grand")
        loop = grand_loop()[0]
        grand_marker = marked()[loop]
        escaped = int((tmp_path / "pids" / f"{loop}.loop").read_text())
        time.sleep(rng.uniform(0.0, 0.5))
        os.kill(loop, signal.SIGKILL)
        wait_for(lambda: not alive(escaped), 15, what="the escaped great-grandchild to die with its command")
        wait_gone({grand_marker}, 30, "the failed attempt of org/grand to end")
        lead.wait(timeout=240)
    finally:
        lead.kill()
    assert lead.returncode == 0, (tmp_path / "lead.out").read_text()[-3000:]
    assert statuses(board)[("org/uv", "discovery")] == "completed"
    assert (tmp_path / "adaptations" / base_adaptation_name("org/uv") / ".venv" / "pyvenv.cfg").exists()
    for model in ("org/uv", "org/grand"):
        assert_gated_or_previous(tmp_path, model, None)
    assert not [p for p, m in marked().items() if m.endswith("@" + str(board.path.resolve()))]
    assert_no_loss_no_duplicates(board)


def test_a_task_whose_team_lead_keeps_dying_fails_after_three_interruptions(board: BoardStore, tmp_path: Path) -> None:
    rng = random.Random(3)
    register(board, {"org/loop": {"hold": 5}})
    for kill in range(3):
        lead = start_lead(board.path, tmp_path)
        wait_for(lambda: any(marked().get(p) for p in loop_pids(tmp_path)), 90, what=f"attempt {kill + 1}")
        markers = {m for m in marked().values() if m.endswith("@" + str(board.path.resolve()))}
        assert markers
        time.sleep(rng.uniform(0.0, 0.5))
        lead.kill()
        lead.wait()
        wait_gone(markers, 30, "the orphaned attempt to die")
        for pid in loop_pids(tmp_path):
            (tmp_path / "pids" / f"{pid}.loop").unlink()
    lead = start_lead(board.path, tmp_path)
    assert lead.wait(timeout=120) == 1  # a task failed in this run
    [task] = [t for t in board.list_tasks() if t.stage == "discovery"]
    assert task.status == "failed" and task.diagnosis["rule"] == "interrupted_too_often", task.diagnosis
    assert loop_pids(tmp_path) == []  # no fourth attempt was started
    assert_no_loss_no_duplicates(board)


def test_a_worker_stops_what_its_stage_started_itself_after_its_stdout_closed_and_two_sigterms(
    board: BoardStore, tmp_path: Path
) -> None:
    """What a SIGKILLed team lead leaves its worker: the pipe it logs to has no reader, and the
    parent-death signal comes once per dying thread. The stop must still reach a child the stage
    started directly (no run_command to clean up after it) that left the group."""
    register(board, {"org/here": {"escape_here": 120}})
    job = claimed_job(board, "org/here", "discovery", tmp_path / "work", tmp_path / "run.json")
    write(tmp_path / "run.job.json", job)
    marker = str(marker_for(board.path, job.task.id, job.token))
    worker = subprocess.Popen(
        [sys.executable, "-m", "ascendbridge.workers.worker", "--job", str(tmp_path / "run.job.json")],
        env=env_for(tmp_path, **{ATTEMPT_ENV: marker}),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    here = tmp_path / "pids"
    escaped = 0
    try:
        wait_for(lambda: any(here.glob("*.here")), 90, what="the stage's own escaped child")
        escaped = int(next(here.glob("*.here")).read_text())
        assert marked().get(escaped) == marker
        assert worker.stdout is not None
        worker.stdout.close()  # as the team lead's death closes it
        worker.send_signal(signal.SIGTERM)
        worker.send_signal(signal.SIGTERM)
        wait_gone({marker}, 30, "the escaped child of the stopped worker to die")
    finally:
        worker.kill()
        worker.wait()
        if escaped and alive(escaped):
            os.kill(escaped, signal.SIGKILL)


RESTORER = textwrap.dedent("""\
    import sys
    from pathlib import Path
    from ascendbridge.agents.sandbox import Workspace
    target = Path(sys.argv[1])
    ws = Workspace(target)
    for p in target.glob("f*.txt"):
        p.write_text("edited")
    (target / "extra.txt").write_text("edited")
    print("restoring", flush=True)
    ws.restore_original()
    print("restored", flush=True)
    """)


def test_sandbox_restore_killed_at_random_moments_never_leaves_a_half_copied_directory(tmp_path: Path) -> None:
    rng = random.Random(11)
    for round_ in range(4):
        target = staging_dir(tmp_path / f"r{round_}" / "adapt", "healing", 1)  # an attempt's staging copy
        (target / ".venv").mkdir(parents=True)
        (target / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
        for i in range(400):
            (target / f"f{i:03d}.txt").write_text("good")
        proc = subprocess.Popen(
            [sys.executable, "-c", RESTORER, str(target)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "restoring"
        time.sleep(rng.uniform(0.0, 0.08))
        proc.kill()
        proc.wait()
        files = sorted(target.glob("f*.txt"))
        contents = {p.read_text() for p in files}
        assert len(files) == 400 and len(contents) == 1, f"round {round_}: {len(files)} files, {contents}"
        assert (contents == {"good"}) == (not (target / "extra.txt").exists())
        assert (target / ".venv" / "pyvenv.cfg").exists()
        scratch = sorted(p.name.rsplit("-", 1)[0] for p in target.parent.glob("ab-agent-*"))
        assert scratch == ["ab-agent", "ab-agent-pristine"], scratch  # the killed workspace's files
        discard(target)  # ... go with the attempt: nothing leaks into the system temp directory
        assert not target.parent.exists()


def test_busy_board_is_waited_out_and_nothing_is_lost_or_recorded_twice(board: BoardStore, tmp_path: Path) -> None:
    register(board, {f"org/m{i}": {"hold": 0.1} for i in range(3)})
    lead = start_lead(board.path, tmp_path, "--workers", "3", ASCENDBRIDGE_BOARD_BUSY_TIMEOUT_S="0.2")
    try:
        wait_for(lambda: loop_pids(tmp_path), 90, what="the first runs")
        hog = sqlite3.connect(board.path, isolation_level=None)
        hog.execute("BEGIN IMMEDIATE")  # another writer holds the lock for 15 busy timeouts
        time.sleep(3.0)
        hog.execute("ROLLBACK")
        hog.close()
        lead.wait(timeout=180)
    finally:
        lead.kill()
    out = (tmp_path / "lead.out").read_text()
    assert lead.returncode == 0, out[-3000:]
    assert "board busy" in out
    assert all(s == "completed" for (_, st), s in statuses(board).items() if st == "discovery")
    assert_no_loss_no_duplicates(board)
