"""A reduced-depth proxy on the board: `register_model --depth N` (and a registration file's
`proxy_depth`) records it with the model, `set_depth` changes it, and a depth the model cannot give
is one `error:` line that registers nothing; discovery refuses one the CLI could not check (a
Hub model, a model registered from the dashboard). Real board_ops.py processes on a real board."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore, Registration
from ascendbridge.board.schema import SCHEMA_VERSION
from ascendbridge.config import REPO_ROOT
from ascendbridge.refusals import is_refusal, remedy
from bench.support.local_model import stage_context
from discovery.stage import DISCOVERY_STAGE
from tests.board.test_board_cli import assert_one_line_error, cli, ok, ok_json

pytestmark = pytest.mark.slow  # board_ops.py processes (seconds each)

QWEN = REPO_ROOT / "sized_models" / "qwen3-0.6b"  # 28 layers


def test_register_with_depth_records_the_proxy_on_the_board(tmp_path: Path) -> None:
    board = tmp_path / "board.db"
    ok(cli("init", cwd=tmp_path, board=board))
    made = cli("register_model", "--model_id", "sized/q-d4", "--source", "local", "--path", str(QWEN), "--depth", "4",
               cwd=tmp_path, board=board)  # fmt: skip
    assert "registered sized/q-d4" in ok(made)
    shown = ok_json(cli("--json", "show", "sized/q-d4", cwd=tmp_path, board=board))
    assert shown["model"]["proxy_depth"] == 4
    (registered,) = [e for e in shown["events"] if e["kind"] == "registered"]
    assert registered["data"]["proxy_depth"] == 4
    text = ok(cli("show", "sized/q-d4", cwd=tmp_path, board=board))
    assert "proxy: 4 layers" in text  # before discovery: the model's own count is not known yet

    # a registration file's key, relative paths and all
    listing = tmp_path / "models.jsonl"
    listing.write_text(json.dumps({"model_id": "sized/q-d1", "source": "local", "path": str(QWEN), "proxy_depth": 1}))
    ok(cli("register_many", str(listing), cwd=tmp_path, board=board))
    with BoardStore(board, read_only=True) as store:
        assert store.get_model("sized/q-d1").proxy_depth == 1
        assert store.get_model("sized/q-d4").proxy_depth == 4

    # set_depth changes it (and --full takes it away), each with its event
    ok(cli("set_depth", "sized/q-d4", "28", cwd=tmp_path, board=board))
    ok(cli("set_depth", "sized/q-d1", "--full", cwd=tmp_path, board=board))
    with BoardStore(board, read_only=True) as store:
        assert (store.get_model("sized/q-d4").proxy_depth, store.get_model("sized/q-d1").proxy_depth) == (28, None)
        assert any(e.kind == "policy" and "proxy_depth = 28" in e.message for e in store.list_events("sized/q-d4"))


def test_a_depth_the_model_cannot_give_is_one_line_and_registers_nothing(tmp_path: Path) -> None:
    board = tmp_path / "board.db"
    ok(cli("init", cwd=tmp_path, board=board))
    base = ("register_model", "--model_id", "sized/q", "--source", "local", "--path", str(QWEN))
    assert_one_line_error(cli(*base, "--depth", "0", cwd=tmp_path, board=board), 2, "depth 0 is not a layer count")
    assert_one_line_error(
        cli(*base, "--depth", "29", cwd=tmp_path, board=board), 2, "depth 29 is not within the model's 28 layers"
    )
    listing = tmp_path / "models.jsonl"
    listing.write_text(json.dumps({"model_id": "sized/q", "source": "local", "path": str(QWEN), "proxy_depth": 40}))
    assert_one_line_error(cli("register_many", str(listing), cwd=tmp_path, board=board), 2, "depth 40 is not within")
    ok(cli(*base, cwd=tmp_path, board=board))
    assert_one_line_error(cli("set_depth", "sized/q", "30", cwd=tmp_path, board=board), 2, "depth 30 is not within")
    assert_one_line_error(cli("set_depth", "sized/q", cwd=tmp_path, board=board), 2, "give a depth N or --full")
    with BoardStore(board, read_only=True) as store:
        assert [m.model_id for m in store.list_models()] == ["sized/q"] and store.get_model(
            "sized/q"
        ).proxy_depth is None


def test_discovery_refuses_a_depth_past_the_models_layers(board: BoardStore) -> None:
    """Registered past the CLI's check (the store takes any depth >= 1): discovery reads the config and
    refuses it on the first attempt, with the remedy."""
    board.register_models([Registration(model_id="sized/q", source="local", path=str(QWEN), proxy_depth=64)])
    outcome = DISCOVERY_STAGE.run(stage_context(board, "sized/q", "discovery"))
    assert outcome.status == "failed" and outcome.diagnosis is not None
    assert outcome.summary == "sized/q: depth 64 is not within the model's 28 layers (a proxy builds 1 to 28)"
    assert is_refusal(outcome.diagnosis) and "board_ops.py set_depth MODEL N" in remedy(outcome.diagnosis)


def test_a_v9_board_gains_the_proxy_column(tmp_path: Path) -> None:
    """A v9 board (today's less models.proxy_depth) upgrades in place; its models keep the full depth."""
    path = tmp_path / "v9.db"
    with BoardStore.init(path) as store:
        store.register_models([Registration(model_id="org/m", source="local", path="/m")])
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE models DROP COLUMN proxy_depth")
    con.execute("UPDATE schema_info SET value = '9' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    with BoardStore(path) as store:
        assert store.get_model("org/m").proxy_depth is None
        store.register_models([Registration(model_id="org/p", source="local", path="/p", proxy_depth=2)])
        assert store.get_model("org/p").proxy_depth == 2
    con = sqlite3.connect(path)
    assert con.execute("SELECT value FROM schema_info WHERE key = 'schema_version'").fetchone()[0] == str(
        SCHEMA_VERSION
    )
    con.close()
