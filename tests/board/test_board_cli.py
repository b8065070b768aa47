"""board_ops.py through real subprocesses: every subcommand's happy path, and every bad input
answered with one `error:` line, the documented exit code and an unchanged board."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ab_runtime.progress import PROGRESS_FILE_ENV, Progress
from ascendbridge.board import AttemptEnd, AttemptStart, BoardStore, NewEvent, Registration
from ascendbridge.board.schema import SCHEMA_VERSION
from ascendbridge.config import REPO_ROOT
from ascendbridge.workers.heartbeat import heartbeat_path

pytestmark = pytest.mark.slow  # every test drives real board_ops.py processes (seconds each)

SCRIPT = REPO_ROOT / "scripts" / "board_ops.py"


def cli(*args: str, cwd: Path, board: Path | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run board_ops.py from `cwd` (never the repo root: it must not depend on the cwd). The limit only
    guards against a hang: its imports (SQLAlchemy) take ~1 s idle, 18 s beside busy loops, and four
    concurrent calls once passed 60 s there."""
    env = dict(os.environ)
    if board is not None:
        env["ASCENDBRIDGE_BOARD"] = str(board)
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def cli_many(calls: list[tuple[str, ...]], cwd: Path, board: Path) -> list[subprocess.CompletedProcess]:
    """Independent calls run concurrently: each pays ~1 s of imports, and the suite must stay fast."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda args: cli(*args, cwd=cwd, board=board), calls))


def ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" or "Traceback" not in proc.stderr
    return proc.stdout


def ok_json(proc: subprocess.CompletedProcess) -> Any:
    return json.loads(ok(proc))


def assert_one_line_error(proc: subprocess.CompletedProcess, code: int, *fragments: str) -> None:
    lines = proc.stderr.splitlines()
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert proc.stdout == ""


def snapshot(path: Path) -> dict[str, Any]:
    with BoardStore(path) as store:
        return store.export()


@pytest.fixture()
def filled_board(board: BoardStore, board_path: Path) -> Path:
    """A board with two models, one of them one stage in."""
    board.register_models([Registration(model_id="org/alpha", priority=2), Registration(model_id="beta")])
    task = board.claim_next("worker", 60)
    board.complete_task(task.id, task.fencing_token, {})
    return board_path


# ------------------------------------------------------------------ happy paths
def test_init_register_list_show(tmp_path: Path) -> None:
    board = tmp_path / "state" / "board.db"
    board.parent.mkdir()
    assert "created board" in ok(cli("init", cwd=tmp_path, board=board))
    assert ok_json(cli("--json", "init", cwd=tmp_path, board=board)) == {
        "board": str(board),
        "created": False,
        "schema_version": SCHEMA_VERSION,
    }
    created = ok_json(
        cli(
            "register_model",
            "--model_id",
            "org/Alpha",
            "--priority",
            "2",
            "--description",
            "[bold]not markup[/bold]",
            "--json",
            cwd=tmp_path,
            board=board,
        )
    )
    assert created == [{"model_id": "org/Alpha", "adaptation_name": "org__alpha", "created": True}]
    (tmp_path / "weights" / "tiny").mkdir(parents=True)
    (tmp_path / "weights" / "tiny" / "config.json").write_text("{}")  # a model directory has its config
    ok(
        cli(
            "register_model",
            "--model_id",
            "local/tiny",
            "--source",
            "local",
            "--path",
            "weights/tiny",
            "--revision",
            "v1.0",
            "--allow-remote-code",
            cwd=tmp_path,
            board=board,
        )
    )
    again, listed, table, pending, adaptation, optimization, shown = cli_many(
        [
            ("register_model", "--model_id", "org/Alpha"),
            ("list_models", "--json"),
            ("list_models",),
            ("list_discovery_tasks", "--status", "pending", "--json"),
            ("list_adaptation_tasks",),
            ("list_optimization_tasks", "--status", "in_progress", "--json"),
            ("show", "org/Alpha"),
        ],
        cwd=tmp_path,
        board=board,
    )
    assert "already registered" in ok(again)
    models = {m["model_id"]: m for m in ok_json(listed)}
    assert set(models) == {"org/Alpha", "local/tiny"}
    assert models["local/tiny"]["path"] == str(tmp_path / "weights" / "tiny")  # absolute, not cwd-relative
    assert models["local/tiny"]["allow_remote_code"] is True
    assert models["org/Alpha"]["stages"]["discovery"] == "pending"
    assert "org/Alpha" in ok(table) and "discovery: pending" in ok(table)
    assert [t["model_id"] for t in ok_json(pending)] == ["org/Alpha", "local/tiny"]  # priority first
    assert "waiting" in ok(adaptation)
    assert ok_json(optimization) == []
    shown = ok(shown)
    assert "[bold]not markup[/bold]" in shown and "business_benchmark" in shown and "registered" in shown


def test_register_many_text_and_jsonl(tmp_path: Path, board: BoardStore, board_path: Path) -> None:
    (tmp_path / "models" / "tiny").mkdir(parents=True)
    (tmp_path / "models" / "tiny" / "config.json").write_text("{}")
    regfile = tmp_path / "models" / "list.txt"
    regfile.write_text(
        "# demo models\n\ngpt2\nbert-base-uncased   # trailing comment\n"
        '{"model_id": "local/tiny", "source": "local", "path": "tiny", "priority": 5}\n'
        "gpt2\n"
    )
    out = ok(cli("register_many", str(regfile), cwd=tmp_path, board=board_path))
    assert "3 registered, 1 already registered" in out
    assert board.get_model("local/tiny").path == str(tmp_path / "models" / "tiny")  # relative to the file
    again = ok_json(cli("register_many", str(regfile), "--json", cwd=tmp_path, board=board_path))
    assert [r["created"] for r in again] == [False] * 4


def test_show_gives_a_running_attempts_last_progress_line(
    tmp_path: Path, board: BoardStore, board_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The heartbeat beside the running attempt's log, as a model run writes it, in `show` and `show --json`."""
    board.register_models([Registration(model_id="org/slow")])
    task = board.claim_task(board.list_tasks("discovery", model_id="org/slow")[0].id, "team-lead.w1", 60)
    log = tmp_path / "logs" / "org__slow" / "discovery" / "attempt-1.log"
    log.parent.mkdir(parents=True)
    board.start_attempt(task.id, task.fencing_token, AttemptStart("worker --job run", str(log)))
    os.environ[PROGRESS_FILE_ENV] = str(heartbeat_path(log))
    try:
        with Progress("baseline contract (reference, CPU float32)", total=4, every_s=0.0, out=io.StringIO()) as p:
            p.advance(note="loss 5.7818")
            text, shown = cli_many(
                [("show", "org/slow", "--wide"), ("show", "org/slow", "--json")], tmp_path, board_path
            )
    finally:
        del os.environ[PROGRESS_FILE_ENV]
    line = ok_json(shown)["progress"]["discovery"]
    assert re.fullmatch(
        r"baseline contract \(reference, CPU float32\): step 1/4, elapsed 0s, [\d.]+ step/s \(loss 5.7818\) \(\d+s ago\)",
        line,
    ), line
    assert "running: last progress line" in ok(text) and "step 1/4" in ok(text)


def test_steering_commands(filled_board: Path, tmp_path: Path) -> None:
    b = filled_board
    with BoardStore(b) as store:  # a worker fails beta's discovery, with an attempt on record
        task = store.claim_next("adapter-1", 60)
        attempt = store.start_attempt(task.id, task.fencing_token, AttemptStart("python demo.py", "/logs/beta.log"))
        store.finish_attempt(attempt, AttemptEnd("failed", 3, 1.25, fix_applied="none"))
        store.fail_task(task.id, task.fencing_token, {"summary": "config.json missing"})
    shown_json, shown, priority, rolled, everyone = cli_many(
        [
            ("show", "beta", "--json"),
            ("show", "beta"),
            ("set_priority", "org/alpha", "9", "--json"),
            ("rollback", "org/alpha", "--to", "discovery", "--json"),
            ("guide", "--all", "prefer sdpa attention"),
        ],
        cwd=tmp_path,
        board=b,
    )
    data = ok_json(shown_json)
    assert data["attempts"][0]["exit_code"] == 3 and data["attempts"][0]["log_path"] == "/logs/beta.log"
    assert data["tasks"][0]["diagnosis"]["summary"] == "config.json missing"
    assert "config.json missing" in ok(shown)
    assert ok_json(priority)["priority"] == 9
    assert [(t["stage"], t["status"]) for t in ok_json(rolled)][:2] == [
        ("discovery", "pending"),
        ("adaptation", "waiting"),
    ]
    ok(everyone)
    assert "discovery is pending again" in ok(cli("retry", "beta", cwd=tmp_path, board=b))
    assert ok_json(cli("skip", "beta", "--stage", "healing", "--json", cwd=tmp_path, board=b))["status"] == "skipped"
    assert ok_json(cli("pause", "beta", "--json", cwd=tmp_path, board=b))["paused"] is True
    assert ok_json(cli("resume", "beta", "--json", cwd=tmp_path, board=b))["paused"] is False
    assert ok_json(cli("allow_remote_code", "beta", "--json", cwd=tmp_path, board=b))["allow_remote_code"] is True
    ok(cli("guide", "beta", "try", "bf16", cwd=tmp_path, board=b))
    shown = ok_json(cli("show", "beta", "--json", cwd=tmp_path, board=b))
    assert [g["text"] for g in shown["open_guidance"]] == ["try bf16"]
    kinds = [e["kind"] for e in shown["events"]]
    assert kinds[-6:] == ["retry", "skipped", "paused", "resumed", "policy", "guidance"]
    with BoardStore(b) as store:
        assert sorted(g.model_id or "" for g in store.list_guidance()) == ["", "beta"]


def test_agents_cleanup_events_export(filled_board: Path, tmp_path: Path) -> None:
    b = filled_board
    assert "registered agent" in ok(
        cli("heartbeat", "--agent-id", "adapter-1", "--role", "adapter", cwd=tmp_path, board=b)
    )
    with BoardStore(b) as store:
        task = store.claim_next("adapter-1", lease_s=600)
    assert "heartbeat agent" in ok(
        cli("heartbeat", "--agent-id", "adapter-1", "--task-id", str(task.id), cwd=tmp_path, board=b)
    )
    [agent] = ok_json(cli("list_agents", "--json", cwd=tmp_path, board=b))
    assert (agent["id"], agent["role"], agent["current_task_id"]) == ("adapter-1", "adapter", task.id)
    time.sleep(0.05)
    cleaned = ok_json(cli("cleanup", "--stale-after", "0.01", "--json", cwd=tmp_path, board=b))
    assert [a["id"] for a in cleaned["stale_agents"]] == ["adapter-1"]
    with BoardStore(b) as store:
        assert store.get_task(task.id).status == "pending"
    target = tmp_path / "out" / "board.json"
    target.parent.mkdir()
    events, plain, to_file, to_stdout = cli_many(
        [
            ("events", "--model", "beta", "--limit", "2", "--json"),
            ("events",),
            ("export", "--output", str(target)),
            ("export",),
        ],
        cwd=tmp_path,
        board=b,
    )
    assert [e["kind"] for e in ok_json(events)] == ["claimed", "lease_expired"]
    assert "agent_stale" in ok(plain)
    assert "exported 2 models" in ok(to_file)
    exported = json.loads(target.read_text())
    assert exported == snapshot(b) == ok_json(to_stdout)


def test_events_follow_prints_new_events_and_exits_0_on_ctrl_c(filled_board: Path, tmp_path: Path) -> None:
    env = dict(os.environ, ASCENDBRIDGE_BOARD=str(filled_board))
    argv = [sys.executable, str(SCRIPT), "events", "--follow", "--json", "--interval", "0.1"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = json.loads(proc.stdout.readline())  # the backlog arrives first
        assert first["kind"] == "registered"
        with BoardStore(filled_board) as store:
            store.add_event(NewEvent("note", "hello from the test", model_id="beta"))
        while True:
            event = json.loads(proc.stdout.readline())
            if event["kind"] == "note":
                break
        assert event["message"] == "hello from the test" and event["model_id"] == "beta"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert "Traceback" not in proc.stderr.read()


# ------------------------------------------------------------------ bad input
BAD_MODEL_IDS = [
    ("", "empty"),
    ("x" * 300, "at most 128"),
    ("/etc/passwd", "absolute"),
    ("org/../../etc", ".."),
    ("a;rm -rf ~", "characters outside"),
]

BAD_COMMANDS: list[tuple[tuple[str, ...], int, str]] = [
    (("show", "nope/model"), 2, "unknown model 'nope/model'"),
    (("retry", "nope"), 2, "unknown model"),
    (("skip", "nope", "--stage", "healing"), 2, "unknown model"),
    (("rollback", "nope", "--to", "discovery"), 2, "unknown model"),
    (("set_priority", "nope", "3"), 2, "unknown model"),
    (("events", "--model", "nope"), 2, "unknown model"),
    (("retry", "beta", "--stage", "compile"), 2, "invalid choice: 'compile'"),
    (("list_healing_tasks", "--status", "done"), 2, "invalid choice: 'done'"),
    (("skip", "beta"), 2, "--stage"),
    (("set_priority", "beta", "high"), 2, "invalid int value"),
    (("set_priority", "beta", str(2**70)), 2, "out of range"),
    (("frobnicate",), 2, "invalid choice"),
    (("retry", "beta", "--stage", "healing"), 1, "cannot retry healing"),
    (("rollback", "beta", "--to", "benchmark"), 1, "predecessor is not done"),
    (("register_model", "--model_id", "ok", "--source", "local", "--path", "/no/such/dir"), 2, "does not exist"),
    (("register_model", "--model_id", "ok", "--revision", "main;id"), 2, "revision"),
    (("register_model", "--model_id", "ok", "--url", "file:///etc/passwd"), 2, "url"),
    (("heartbeat", "--agent-id", "new-agent"), 2, "--role"),
    (("heartbeat", "--agent-id", "bad id;x", "--role", "adapter"), 2, "agent id"),
    (("cleanup", "--stale-after", "-5"), 2, "positive"),
    (("register_many", "/no/such/file.txt"), 2, "does not exist"),
]

BAD_FILES = [
    ('good-one\n{"model_id": "x", "priority": "high"}\n', "line 2: field priority"),
    ("good-one\n\n# ok\nbad id here\n", "line 4"),
    ('good-one\n{"model_id": "y", "colour": "red"}\n', "line 2: unknown field(s) colour"),
    ('{"model_id": "z"\n', "line 1: invalid JSON"),
    ('good-one\n["a", "b"]\n', "line 2"),
    ("# only comments\n", "lists no models"),
]


def test_bad_inputs_leave_the_board_unchanged(filled_board: Path, tmp_path: Path) -> None:
    """Every bad input of issue 2 against one board, run concurrently to keep the suite fast."""
    cases: list[tuple[tuple[str, ...], int, str]] = [
        (("register_model", "--model_id", model_id), 2, fragment) for model_id, fragment in BAD_MODEL_IDS
    ]
    cases += BAD_COMMANDS
    for n, (content, fragment) in enumerate(BAD_FILES):
        regfile = tmp_path / f"models-{n}.txt"
        regfile.write_text(content)
        cases.append((("register_many", str(regfile)), 2, fragment))
    before = snapshot(filled_board)
    procs = cli_many([args for args, _, _ in cases], cwd=tmp_path, board=filled_board)
    problems = []
    for (args, code, fragment), proc in zip(cases, procs):
        try:
            assert_one_line_error(proc, code, fragment)
        except AssertionError as exc:
            problems.append(f"{args}: {exc}")
    assert problems == []
    assert snapshot(filled_board) == before


def test_missing_board_says_run_init(tmp_path: Path) -> None:
    board = tmp_path / "board.db"
    assert_one_line_error(cli("list_models", cwd=tmp_path, board=board), 1, "board_ops.py init")
    assert_one_line_error(cli("register_model", "--model_id", "gpt2", cwd=tmp_path, board=board), 1, "init")
    assert not board.exists()


def test_file_that_is_not_sqlite(tmp_path: Path) -> None:
    notes = tmp_path / "board.db"
    notes.write_text("hello\n")
    for args in (("init",), ("list_models",)):
        assert_one_line_error(cli(*args, cwd=tmp_path, board=notes), 1, "not a SQLite database")
    assert notes.read_text() == "hello\n"


def test_board_from_newer_schema(tmp_path: Path) -> None:
    board = tmp_path / "board.db"
    BoardStore.init(board).close()
    con = sqlite3.connect(board)
    con.execute("UPDATE schema_info SET value = '99' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    assert_one_line_error(cli("init", cwd=tmp_path, board=board), 1, "schema version 99", "upgrade")
    con = sqlite3.connect(board)
    assert con.execute("SELECT value FROM schema_info").fetchone()[0] == "99"
    con.close()


def test_unwritable_directory(tmp_path: Path) -> None:
    if os.geteuid() == 0:  # root ignores permission bits; /proc refuses new files even to root
        directory = Path("/proc")
    else:
        directory = tmp_path / "readonly"
        directory.mkdir()
        directory.chmod(0o555)
    board = directory / "board.db"
    assert_one_line_error(cli("--board", str(board), "init", cwd=tmp_path), 1, "not writable")
    assert not board.exists()
    real_board = tmp_path / "board.db"
    BoardStore.init(real_board).close()
    assert_one_line_error(
        cli("export", "-o", str(directory / "x.json"), cwd=tmp_path, board=real_board), 1, "cannot write"
    )
    assert not (directory / "x.json").exists()
