"""The README's main job, run as a user runs it (a real subprocess on a real board)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ascendbridge.board import BoardStore
from ascendbridge.demo_models import list_demo_models
from ascendbridge.main_job import MEASUREMENT_STAGES, PREPARATION_STAGES, _passes, build_parser

REPO = Path(__file__).resolve().parents[2]


def run_main_job(*args: str, board: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ascendbridge.main_job", "--board", str(board), *args],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def test_register_only_is_idempotent(board_path: Path) -> None:
    first = run_main_job("--register-only", "--no-minilm", board=board_path)
    assert first.returncode == 0, first.stderr
    demos = list_demo_models()
    assert first.stdout.count("already registered") == 0
    second = run_main_job("--register-only", "--no-minilm", board=board_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout.count("already registered") == len(demos)
    with BoardStore(board_path) as store:
        assert sorted(m.model_id for m in store.list_models()) == sorted(d.model_id for d in demos)
        assert all(t.status == "pending" for t in store.list_tasks(stage="discovery"))


def test_bad_argument_is_one_line_and_exit_2(board_path: Path) -> None:
    proc = run_main_job("--workers", "lots", board=board_path)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("error:")
    assert not board_path.exists()


def test_unusable_board_is_one_line_and_exit_3(tmp_path: Path) -> None:
    fake = tmp_path / "board.db"
    fake.write_text("not a database\n")
    proc = run_main_job("--register-only", "--no-minilm", board=fake)
    assert proc.returncode == 3
    assert proc.stderr.strip() == f"error: {fake} is not a SQLite database (wrong file header)"
    assert fake.read_text() == "not a database\n"


def test_timing_stages_run_one_model_at_a_time() -> None:
    default = _passes(build_parser().parse_args(["--workers", "4"]))
    assert default == [(",".join(PREPARATION_STAGES), 4), (",".join(MEASUREMENT_STAGES), 1)]
    explicit = _passes(build_parser().parse_args(["--stages", "discovery", "--workers", "3"]))
    assert explicit == [("discovery", 3)]
