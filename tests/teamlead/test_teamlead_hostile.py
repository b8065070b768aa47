"""The team lead on a corrupt board and on a disk that fills up: exit 3 with one `error:` line,
nothing claimed on a corrupt board, and on a full disk every attempt closed (released, with the
worker's exit code) and nothing left in progress."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore, Registration
from ascendbridge.workers import attempt_dir
from tests.board.board_support import small_tmpfs
from tests.teamlead.tl_support import add_models, runs_logged, tl_argv, tl_env, wait_for

EXIT_BOARD = 3


def error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr[-3000:]
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_a_corrupt_board_exits_3_before_claiming_anything(tmp_path: Path) -> None:
    board = tmp_path / "board.db"
    with BoardStore.init(board) as store:
        add_models(store, {f"org/m{i}": {} for i in range(200)})
    pages = board.stat().st_size // 4096
    with board.open("r+b") as fh:  # one 4 KiB page in the middle of the file
        fh.seek((pages // 2) * 4096)
        fh.write(bytes((i * 37 + 11) % 256 for i in range(4096)))
    before = hashlib.sha256(board.read_bytes()).hexdigest()
    proc = subprocess.run(
        tl_argv(board, "--stages", "discovery"), env=tl_env(tmp_path), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == EXIT_BOARD, proc.stderr[-3000:]
    [line] = error_lines(proc.stderr)
    assert "is corrupt" in line and ".recover" in line
    assert hashlib.sha256(board.read_bytes()).hexdigest() == before  # nothing claimed, nothing written
    assert not (tmp_path / "logs" / "org__m0").exists()


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 48 MiB tmpfs of the test's own: board, logs and adaptations all live on it."""
    with small_tmpfs(tmp_path / "disk", "48m") as mnt:
        yield mnt


def fill(disk: Path, leave: int) -> Path:
    """Take all but `leave` bytes of the file system's free space."""
    st = os.statvfs(disk)
    filler = disk / "filler"
    with filler.open("wb") as fh:
        os.posix_fallocate(fh.fileno(), 0, st.f_bavail * st.f_frsize - leave)
    return filler


def test_a_filling_disk_stops_the_team_lead_with_exit_3_and_closes_its_attempts(small_disk: Path) -> None:
    board = small_disk / "board.db"
    with BoardStore.init(board) as store:
        add_models(store, {"org/a": {"discovery": "sleep:120"}, "org/b": {"discovery": "sleep:120"}})
    env = {**tl_env(small_disk), "ASCENDBRIDGE_MIN_FREE_MB": "8"}
    lead = subprocess.Popen(
        tl_argv(board, "--stages", "discovery", "--workers", "2"),
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        wait_for(
            lambda: all(runs_logged(small_disk, m, "attempt=1") for m in ("org/a", "org/b")),
            90,
            what="both attempts running",
        )
        fill(small_disk, 4 * 1024 * 1024)  # 4 MiB left, below the 8 MiB threshold
        _, stderr = lead.communicate(timeout=60)
    finally:
        lead.kill()
    assert lead.returncode == EXIT_BOARD, stderr[-3000:]
    [line] = error_lines(stderr)
    assert "free for" in line and "ASCENDBRIDGE_MIN_FREE_MB=8" in line
    with BoardStore(board, read_only=True) as store:
        assert {t.status for t in store.list_tasks(stage="discovery")} == {"pending"}
        rows = [a for m in ("org/a", "org/b") for _, a in store.list_attempts(m, "discovery")]
    assert len(rows) == 2
    assert all(a.outcome == "released" and a.exit_code is not None and a.finished_at for a in rows), rows

    # Started on the full disk, it dispatches nothing.
    proc = subprocess.run(tl_argv(board, "--stages", "discovery"), env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_BOARD, proc.stderr[-3000:]
    assert "free for" in error_lines(proc.stderr)[0]
    with BoardStore(board, read_only=True) as store:
        assert len([a for m in ("org/a", "org/b") for _, a in store.list_attempts(m, "discovery")]) == 2


def test_the_threshold_must_be_a_number(board: BoardStore, tmp_path: Path) -> None:
    board.register_models([Registration(model_id="org/x")])
    env = {**tl_env(tmp_path), "ASCENDBRIDGE_MIN_FREE_MB": "lots"}
    proc = subprocess.run(tl_argv(board.path), env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "error: bad general setting min_free_mb: Input should be a valid number, unable to parse string as a number"
    )


def test_an_attempt_that_made_nothing_leaves_no_empty_adaptation_directory(tmp_path: Path) -> None:
    """Discovery writes its evidence under logs/: promoting its empty copy used to create an empty
    adaptations/<name>/ that a refused adaptation then left behind."""
    live = tmp_path / "adaptations" / "org__m"
    staging = attempt_dir.prepare(live, "discovery", 1)
    attempt_dir.promote(staging, live)
    assert not live.exists() and not staging.exists()
    staging = attempt_dir.prepare(live, "adaptation", 2)
    (staging / "adaptation.json").write_text("{}")
    attempt_dir.promote(staging, live)
    assert (live / "adaptation.json").is_file() and not staging.exists()
    staging = attempt_dir.prepare(live, "healing", 3)  # an existing directory is still swapped, even emptied
    (staging / "adaptation.json").unlink()
    attempt_dir.promote(staging, live)
    assert live.is_dir() and not any(live.iterdir())


def test_a_restarted_team_lead_closes_the_attempts_its_dead_predecessor_left_open(
    board: BoardStore, tmp_path: Path
) -> None:
    """A team lead killed before it could record its attempt (SIGKILL here; a full disk does the
    same): the next one releases the task and closes the attempt, which never stays NULL."""
    add_models(board, {"org/slow": {"discovery": "sleep:120"}})
    lead = subprocess.Popen(
        tl_argv(board.path, "--stages", "discovery"),
        env=tl_env(tmp_path),
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(lambda: runs_logged(tmp_path, "org/slow", "attempt=1"), 90, what="the first attempt")
    finally:
        lead.kill()
        lead.wait()
    [open_row] = [a for _, a in board.list_attempts("org/slow", "discovery")]
    assert open_row.outcome is None
    proc = subprocess.run(
        tl_argv(board.path, "--stages", "discovery", "--max-interruptions", "1"),
        env=tl_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in proc.stderr and proc.returncode == 1  # a task failed in this run
    assert "attempts in a row ended without an outcome" in proc.stderr, proc.stderr[-3000:]
    [closed] = [a for _, a in board.list_attempts("org/slow", "discovery")]
    assert closed.outcome == "released" and closed.finished_at
    assert closed.diagnosis["rule"] == "team_lead_restarted"
