"""The start command: clear one-line errors, loopback by default, a generated token that works
(the last one as a real process started through scripts/dashboard.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ascendbridge.board import BoardStore, Registration
from dashboard.__main__ import main, parse_args
from tests.dashboard.dash_support import REPO, free_port


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The start command in-process (fast); it fails before serving, so nothing keeps running."""
    try:
        code = main(args)
    except SystemExit as exc:  # argparse rejects bad flags this way
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def assert_one_line_error(result: tuple[int, str], fragment: str) -> None:
    code, stderr = result
    assert code != 0
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.startswith("error:") or ": error:" in line]
    assert lines and fragment in lines[-1], stderr


def test_defaults_bind_loopback() -> None:
    args = parse_args([])
    assert args.host == "127.0.0.1" and args.port == 8765


def test_missing_board_and_not_a_board(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_one_line_error(run(["--board", str(tmp_path / "none.db")], capsys), "no board at")
    fake = tmp_path / "board.db"
    fake.write_text("this is not sqlite")
    assert_one_line_error(run(["--board", str(fake)], capsys), "not a SQLite database")


def test_bad_port_and_short_token(
    board: BoardStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_one_line_error(run(["--board", str(board.path), "--port", "70000"], capsys), "outside 1-65535")
    assert_one_line_error(run(["--board", str(board.path), "--port", "http"], capsys), "not a port number")
    monkeypatch.setenv("ASCENDBRIDGE_DASHBOARD_TOKEN", "short")
    assert_one_line_error(run(["--board", str(board.path)], capsys), "at least 16 characters")


def test_port_in_use(board: BoardStore, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert_one_line_error(
            run(["--board", str(board.path), "--port", str(port)], capsys), f"cannot listen on 127.0.0.1:{port}"
        )


def test_generated_token_is_printed_and_works(board: BoardStore) -> None:
    board.register_models([Registration(model_id="cli/model")])
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "ASCENDBRIDGE_DASHBOARD_TOKEN"}
    argv = [sys.executable, "scripts/dashboard.py", "--board", str(board.path), "--port", str(port)]
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url_line = proc.stdout.readline()
        token_line = proc.stdout.readline()
        assert url_line.startswith(f"dashboard: http://127.0.0.1:{port}/")
        token = token_line.split()[2]
        assert token_line.startswith("action token: ") and len(token) >= 16
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "server did not come up"
                time.sleep(0.1)
        r = httpx.post(
            f"http://127.0.0.1:{port}/api/models/cli/model/priority",
            json={"priority": 5},
            headers={"X-AscendBridge-Token": token},
        )
        assert r.status_code == 200
        assert board.get_model("cli/model").priority == 5
    finally:
        proc.terminate()
        proc.wait(timeout=10)
