"""discovery/scripts/check_discovery.py as a person runs it: a real process on a real board, the
evidence a real discovery run left, exit 0 / 1 / 2 like every stage's checker."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from ascendbridge.board import BoardStore
from ascendbridge.board.records import Registration
from ascendbridge.demo_models import list_demo_models
from ascendbridge.stage_api import StageContext
from discovery.evidence import evidence_path
from discovery.stage import DISCOVERY_STAGE

CHECKER = Path(__file__).resolve().parents[2] / "discovery" / "scripts" / "check_discovery.py"


def _check(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, str(CHECKER), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_the_checker_passes_a_true_claim_and_fails_a_changed_one(
    claim_discovery: Callable[[str], StageContext], board: BoardStore, tmp_path: Path
) -> None:
    demo = next(d for d in list_demo_models() if d.name == "tiny-t5")
    copy = shutil.copytree(demo.path, tmp_path / "t5")
    board.register_models([Registration(model_id=demo.model_id, source="local", path=str(copy))])
    ctx = claim_discovery(demo.model_id)
    assert DISCOVERY_STAGE.run(ctx).status == "done"
    name = ctx.model.adaptation_name

    passed = _check("--adapt", name, "--board", str(board.path), "--json")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    report = json.loads(passed.stdout)
    assert report["passed"] is True and report["adaptation"] == name
    assert report["evidence"] == str(evidence_path(name, ctx.task.fencing_token))
    assert {c["check"] for c in report["checks_run"]} >= {"parameter_count", "config_matches", "decision"}

    config = json.loads((copy / "config.json").read_text())
    config["num_layers"] = 24
    (copy / "config.json").write_text(json.dumps(config))
    failed = _check("--adapt", name, "--board", str(board.path))
    assert failed.returncode == 1
    assert "config_matches" in failed.stdout and failed.stdout.strip().splitlines()[-1].startswith("FAIL: ")


def test_no_model_or_no_evidence_is_one_line_and_exit_2(board: BoardStore, tmp_path: Path) -> None:
    unknown = _check("--adapt", "no-such-model", "--board", str(board.path))
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == f"error: no model with adaptation name 'no-such-model' on {board.path}"

    demo = list_demo_models()[0]
    board.register_models([Registration(model_id=demo.model_id, source="local", path=str(demo.path))])
    name = board.get_model(demo.model_id).adaptation_name
    never_ran = _check("--adapt", name, "--board", str(board.path))
    assert never_ran.returncode == 2 and never_ran.stderr.startswith(f"error: no discovery evidence for {name}")
    assert len(never_ran.stderr.strip().splitlines()) == 1

    no_board = _check("--adapt", name, "--board", str(tmp_path / "missing.db"))
    assert no_board.returncode == 2 and "no board at" in no_board.stderr
