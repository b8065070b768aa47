"""Opening boards made by other versions: a genuine v1 board upgrades in place; newer ones,
foreign SQLite files and non-SQLite files are refused without being touched."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from ascendbridge.board import AttemptEnd, AttemptStart, BoardError, BoardMissingError, BoardStore, Registration
from ascendbridge.board.migrations import V1_DDL, V6_STAGE_ORDER
from ascendbridge.board.schema import SCHEMA_VERSION
from ascendbridge.stages import STAGES

TS = "2026-01-01T00:00:00.000000+00:00"


def make_v1_board(path: Path) -> None:
    """A board exactly as version 1 wrote it, with one model mid-pipeline."""
    con = sqlite3.connect(path)
    for ddl in V1_DDL:
        con.execute(ddl)
    con.execute(
        "INSERT INTO models (id, model_id, source, description, adaptation_name, priority, allow_remote_code,"
        " skip_stages_json, architecture, metadata_json, created_at)"
        " VALUES (1, 'org/old-model', 'huggingface', 'from v1', 'org__old-model', 3, 0,"
        " '[\"business_benchmark\"]', 'BertModel', '{\"layers\": 2}', ?)",
        (TS,),
    )
    # training came with version 6, quantization with version 7
    for i, stage in enumerate(s for s in V6_STAGE_ORDER if s != "training"):
        status = {0: "completed", 1: "pending"}.get(i, "waiting")
        con.execute(
            "INSERT INTO tasks (model_pk, stage, stage_order, status, attempts, fencing_token, updated_at)"
            " VALUES (1, ?, ?, ?, ?, ?, ?)",
            (stage, i, status, 1 if i == 0 else 0, 1 if i == 0 else 0, TS),
        )
    con.execute(
        "INSERT INTO events (model_pk, stage, kind, message, data_json, origin, ts)"
        " VALUES (1, NULL, 'registered', 'registered in v1', '{}', 'cli', ?)",
        (TS,),
    )
    con.execute(
        "INSERT INTO guidance (model_pk, text, origin, state, created_at) VALUES (1, 'keep fp32', 'cli', 'open', ?)",
        (TS,),
    )
    con.commit()
    con.close()


def schema_version(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        return int(con.execute("SELECT value FROM schema_info WHERE key='schema_version'").fetchone()[0])
    finally:
        con.close()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_v1_board_upgrades_in_place_with_data_intact(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    make_v1_board(path)
    assert schema_version(path) == 1
    with BoardStore(path) as store:
        model = store.get_model("org/old-model")
        assert (model.description, model.priority, model.architecture, model.metadata) == (
            "from v1",
            3,
            "BertModel",
            {"layers": 2},
        )
        assert model.paused is False  # column added by the v2 migration
        assert {t.stage: t.status for t in store.list_tasks()}["adaptation"] == "pending"
        assert [g.text for g in store.list_guidance()] == ["keep fp32"]
        assert [e.message for e in store.list_events()] == ["registered in v1"]
        # v6: a training task, skipped by policy (no job), and the pipeline order with it after healing
        # v7: a quantization task, skipped by policy (optional), before serving
        assert model.training is None and model.skip_stages == ["business_benchmark", "quantization", "training"]
        con = sqlite3.connect(path)
        orders = dict(con.execute("SELECT stage, stage_order FROM tasks").fetchall())
        con.close()
        assert orders == {stage: i for i, stage in enumerate(STAGES)}
        assert {t.stage: t.status for t in store.list_tasks()}["training"] == "skipped"
        assert {t.stage: t.status for t in store.list_tasks()}["quantization"] == "skipped"
        task = store.claim_next("worker", 60)
        assert task.stage == "adaptation"
        placed = {
            "host": "h1",
            "devices": ["npu:3", "npu:4"],
            "cpus": [],
            "env": {"ASCENDBRIDGE_NPU_INDEX": "3,4"},
            "exclusive": True,
        }
        attempt = store.start_attempt(
            task.id, task.fencing_token, AttemptStart("cmd", "/log", placement=placed)
        )  # v4 columns
        store.finish_attempt(attempt, AttemptEnd("completed", 0, 1.0))
        assert [(a.host, a.devices) for _, a in store.list_attempts("org/old-model")] == [("h1", "npu:3 npu:4")]
        events = [e for e in store.list_events() if e.kind in ("placed", "devices_released")]
        assert [(e.kind, e.data["devices"]) for e in events] == [
            ("placed", ["npu:3", "npu:4"]),
            ("devices_released", ["npu:3", "npu:4"]),
        ]
        rows = store.record_host_devices(
            "h1", [{"kind": "npu", "index": i, "memory_gb": 64.0} for i in (3, 4)], "npu-smi"
        )  # v4 table
        assert [r.label for r in store.list_host_devices()] == [r.label for r in rows] == ["npu:3", "npu:4"]
        store.complete_task(
            task.id, task.fencing_token, {}, figures=[{"values": {"build_s": 1.5}}]
        )  # metrics table exists now
        store.set_paused("org/old-model", True)
    assert schema_version(path) == SCHEMA_VERSION
    with BoardStore(path) as again:  # reopening is a no-op
        assert again.get_model("org/old-model").paused is True
        assert len(again.list_metrics()) == 1


def test_newer_board_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    BoardStore.init(path).close()
    con = sqlite3.connect(path)
    con.execute("UPDATE schema_info SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    con.commit()
    con.close()
    before = digest(path)
    with pytest.raises(BoardError, match="newer"):
        BoardStore(path)
    assert digest(path) == before


def test_non_sqlite_and_foreign_sqlite_files_are_refused(tmp_path: Path) -> None:
    text_file = tmp_path / "notes.db"
    text_file.write_text("these are notes, not a database\n")
    with pytest.raises(BoardError, match="not a SQLite database"):
        BoardStore.init(text_file)
    assert text_file.read_text() == "these are notes, not a database\n"
    foreign = tmp_path / "other.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    with pytest.raises(BoardError, match="not an AscendBridge board"):
        BoardStore.init(foreign)


def test_missing_board_says_how_to_create_it(tmp_path: Path) -> None:
    with pytest.raises(BoardMissingError, match="board_ops.py init"):
        BoardStore(tmp_path / "absent.db")
    assert not (tmp_path / "absent.db").exists()


def test_v8_board_gains_the_attempts_cost_columns(tmp_path: Path) -> None:
    """A v8 board (today's less the two columns v9 added and the one v10 added) upgrades; its old
    attempts read as not measured, a new one keeps its cost profile and peak memory."""
    path = tmp_path / "v8.db"
    with BoardStore.init(path) as store:
        store.register_models([Registration(model_id="org/m", source="local", path="/m")])
        task = store.claim_next("worker", 60)
        old = store.start_attempt(task.id, task.fencing_token, AttemptStart("cmd", "/log"))
        store.finish_attempt(old, AttemptEnd("retry", 1, 2.0))
    con = sqlite3.connect(path)
    for column in ("cost_profile_json", "peak_rss_bytes"):
        con.execute(f"ALTER TABLE attempts DROP COLUMN {column}")
    con.execute("ALTER TABLE models DROP COLUMN proxy_depth")
    con.execute("UPDATE schema_info SET value = '8' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    with BoardStore(path) as store:
        assert schema_version(path) == SCHEMA_VERSION
        [(_, before)] = store.list_attempts("org/m")
        assert (before.cost_profile, before.peak_rss_bytes, before.duration_s) == (None, None, 2.0)
        [task] = store.list_tasks(status="in_progress")
        new = store.start_attempt(task.id, task.fencing_token, AttemptStart("cmd", "/log"))
        spent = {"model_load": 1.25, "gate": 0.5, "other": 0.25}
        store.finish_attempt(new, AttemptEnd("completed", 0, 2.0, cost_profile=spent, peak_rss_bytes=123456789))
        after = [a for _, a in store.list_attempts("org/m") if a.id == new]
        assert [(a.cost_profile, a.peak_rss_bytes) for a in after] == [(spent, 123456789)]
    con = sqlite3.connect(path)
    columns = {row[1] for row in con.execute("PRAGMA table_info(attempts)")}
    con.close()
    assert {"cost_profile_json", "peak_rss_bytes"} <= columns
