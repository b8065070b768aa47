"""A hostile or unlucky host: a corrupt page in the board, a read-only board, a full disk, paths
and files that are not what they claim. Every case is one `error:` line and nothing written."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ascendbridge.board import BoardCorruptError, BoardFullError, BoardStore, Registration
from tests.board.board_support import small_tmpfs
from tests.board.test_board_cli import SCRIPT, assert_one_line_error, cli, ok, ok_json
from tests.support.read_only import read_only_view

pytestmark = pytest.mark.slow  # real board_ops.py processes on corrupt, read-only and hostile inputs

PAGE = 4096


def corrupt_page(board: Path, number: int) -> None:
    """Overwrite one 4 KiB page (1-based, as SQLite counts) with deterministic garbage."""
    with board.open("r+b") as fh:
        fh.seek((number - 1) * PAGE)
        fh.write(bytes((i * 37 + 11) % 256 for i in range(PAGE)))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def corrupt_board(tmp_path: Path) -> Path:
    """A real board of 300 models, closed (checkpointed), then one page in its middle overwritten."""
    board = tmp_path / "board.db"
    with BoardStore.init(board) as store:
        store.register_models([Registration(model_id=f"org/m{i}") for i in range(300)])
    pages = board.stat().st_size // PAGE
    corrupt_page(board, pages // 2)
    return board


def test_a_corrupt_page_is_refused_before_any_write(corrupt_board: Path, tmp_path: Path) -> None:
    before = digest(corrupt_board)
    for args in (
        ("register_model", "--model_id", "org/new"),
        ("set_priority", "org/m1", "5"),
        ("retry", "org/m1"),
        ("cleanup",),
        ("init",),
    ):
        proc = cli(*args, cwd=tmp_path, board=corrupt_board)
        assert_one_line_error(proc, 1, "is corrupt", ".recover")
    assert digest(corrupt_board) == before
    with pytest.raises(BoardCorruptError, match="is corrupt"):
        BoardStore(corrupt_board)


def test_the_integrity_check_is_bounded_in_time(corrupt_board: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCENDBRIDGE_BOARD_CHECK_S", "0")  # no time for it: opened unchecked
    BoardStore(corrupt_board).close()


# ---------------------------------------------------------------------- read-only board
@pytest.fixture()
def read_only_board(tmp_path: Path) -> Iterator[Path]:
    """A board seen through a read-only bind mount (root ignores file modes; a mount it cannot)."""
    real, view = tmp_path / "real", tmp_path / "view"
    real.mkdir()
    view.mkdir()
    with BoardStore.init(real / "board.db") as store:
        store.register_models([Registration(model_id="org/alpha", priority=3), Registration(model_id="org/beta")])
    with read_only_view(real, view):
        yield view / "board.db"


def test_reading_commands_work_on_a_read_only_board(read_only_board: Path, tmp_path: Path) -> None:
    assert [m["model_id"] for m in ok_json(cli("list_models", "--json", cwd=tmp_path, board=read_only_board))] == [
        "org/alpha",
        "org/beta",
    ]
    assert "org/alpha" in ok(cli("show", "org/alpha", cwd=tmp_path, board=read_only_board))
    assert "org/alpha" in ok(cli("list_discovery_tasks", cwd=tmp_path, board=read_only_board))
    assert ok_json(cli("events", "--json", cwd=tmp_path, board=read_only_board))
    exported = tmp_path / "export.json"
    assert "exported 2 models" in ok(cli("export", "--output", str(exported), cwd=tmp_path, board=read_only_board))
    assert not list(read_only_board.parent.glob("board.db-*"))  # no WAL or shm written beside it


def test_writing_commands_refuse_a_read_only_board_in_one_line(read_only_board: Path, tmp_path: Path) -> None:
    for args in (
        ("register_model", "--model_id", "org/new"),
        ("set_priority", "org/alpha", "1"),
        ("pause", "org/alpha"),
    ):
        assert_one_line_error(cli(*args, cwd=tmp_path, board=read_only_board), 1, "not writable")


# ---------------------------------------------------------------------- full disk
def test_a_full_disk_is_one_board_error_and_nothing_half_written(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "small", "2m") as mnt:
        board = mnt / "board.db"
        with BoardStore.init(board) as store:
            store.register_models([Registration(model_id="org/first")])
            filler = mnt / "filler"
            with filler.open("wb") as fh:  # every remaining block
                try:
                    while True:
                        fh.write(b"\0" * 65536)
                        fh.flush()
                except OSError:
                    pass
            with pytest.raises(BoardFullError, match="disk is full"):
                store.register_models([Registration(model_id=f"org/m{i}", description="x" * 2000) for i in range(500)])
        proc = cli("register_model", "--model_id", "org/late", "--description", "y" * 2000, cwd=tmp_path, board=board)
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "full" in proc.stderr, proc.stderr
        filler.unlink()
        with BoardStore(board) as store:  # the refused writes left nothing behind
            assert [m.model_id for m in store.list_models()] == ["org/first"]


# ---------------------------------------------------------------------- --path and files
@pytest.mark.parametrize(
    "where,fragment",
    [
        ("FILE", "not a directory"),
        ("/dev/null", "kernel file system"),
        ("/proc", "kernel file system"),
        ("/proc/self", "kernel file system"),
        ("/sys", "kernel file system"),
        ("/", "no config.json"),
        ("/etc", "no config.json"),
        ("EMPTY", "no config.json"),
    ],
)
def test_register_refuses_a_path_that_is_not_a_model_directory(
    tmp_path: Path, board: BoardStore, board_path: Path, where: str, fragment: str
) -> None:
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "empty").mkdir()
    path = {"FILE": str(tmp_path / "file.txt"), "EMPTY": str(tmp_path / "empty")}.get(where, where)
    proc = cli(
        "register_model", "--model_id", "org/x", "--source", "local", "--path", path, cwd=tmp_path, board=board_path
    )
    assert_one_line_error(proc, 2, "--path", fragment)
    listed = tmp_path / "list.jsonl"
    listed.write_text(f'{{"model_id": "org/y", "source": "local", "path": "{path}"}}\n')
    assert_one_line_error(cli("register_many", str(listed), cwd=tmp_path, board=board_path), 2, fragment)
    assert board.list_models() == []


def test_register_accepts_a_model_directory(tmp_path: Path, board: BoardStore, board_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    ok(
        cli(
            "register_model",
            "--model_id",
            "org/x",
            "--source",
            "local",
            "--path",
            "model",
            cwd=tmp_path,
            board=board_path,
        )
    )
    assert board.get_model("org/x").path == str(tmp_path / "model")


@pytest.mark.parametrize("priority", ["１２", "١٢", "۱۲", "1２"])
def test_priorities_are_ascii_digits_only(tmp_path: Path, board: BoardStore, board_path: Path, priority: str) -> None:
    board.register_models([Registration(model_id="org/a")])
    assert_one_line_error(
        cli("register_model", "--model_id", "org/b", "--priority", priority, cwd=tmp_path, board=board_path),
        2,
        "ASCII digits",
    )
    assert_one_line_error(cli("set_priority", "org/a", priority, cwd=tmp_path, board=board_path), 2, "ASCII digits")
    assert [(m.model_id, m.priority) for m in board.list_models()] == [("org/a", 0)]
    ok(cli("set_priority", "org/a", "-12", cwd=tmp_path, board=board_path))
    assert board.get_model("org/a").priority == -12


@pytest.mark.parametrize("source", ["/dev/zero", "SPARSE"])
def test_register_many_refuses_an_endless_or_huge_file_without_reading_it(
    tmp_path: Path, board: BoardStore, board_path: Path, source: str
) -> None:
    if source == "SPARSE":
        sparse = tmp_path / "models.txt"
        with sparse.open("wb") as fh:
            fh.truncate(8 * 1024**3)  # 8 GB, no blocks
        source = str(sparse)
    proc = subprocess.run(
        ["prlimit", "--as=1500000000", "--", *cli_argv("register_many", source)],
        cwd=tmp_path,
        env={**os.environ, "ASCENDBRIDGE_BOARD": str(board_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert_one_line_error(proc, 2, "limit for this file")
    assert board.list_models() == []


def cli_argv(*args: str) -> list[str]:
    return [sys.executable, str(SCRIPT), *args]
