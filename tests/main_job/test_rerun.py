"""A second main job re-does only what changed (issue 52, "Re-runs are cheap").

Real main jobs (subprocesses, a real board, the real discovery and adaptation stages) on two tiny
demo configurations copied into the test's folder; then the reuse check's refusals on a board whose
completions were written by hand (no record, a Hub model without a pinned revision, --fresh).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ascendbridge.board import BoardStore, Registration
from ascendbridge.reuse.check import FRESH, plan

REPO = Path(__file__).resolve().parents[2]
STAGES = "discovery,adaptation"


def main_job(board: Path, models: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "ascendbridge.main_job", "--board", str(board), "--models", str(models)]
        + ["--stages", STAGES, "--workers", "1", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def attempt_counts(board: Path) -> dict[tuple[str, str], int]:
    with BoardStore(board) as store:
        return {
            (m.model_id, stage): sum(1 for s, _ in store.list_attempts(m.model_id) if s == stage)
            for m in store.list_models()
            for stage in STAGES.split(",")
        }


@pytest.mark.slow  # fast tier: three main jobs with real discovery and adaptation (uv lock)
def test_a_second_main_job_reuses_what_is_unchanged_and_reruns_what_changed(board_path: Path, tmp_path: Path) -> None:
    models = tmp_path / "models"
    for name in ("tiny-bert", "tiny-gpt2"):
        shutil.copytree(REPO / "demo_models" / name, models / name)
    listing = tmp_path / "models.jsonl"
    listing.write_text(
        "".join(
            json.dumps({"model_id": f"t/{n}", "source": "local", "path": f"models/tiny-{n}"}) + "\n"
            for n in ("bert", "gpt2")
        )
    )
    first = main_job(board_path, listing)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    after_first = attempt_counts(board_path)
    assert set(after_first.values()) == {1}

    second = main_job(board_path, listing)
    assert second.returncode == 0, second.stderr[-3000:]
    assert attempt_counts(board_path) == after_first  # nothing ran again
    assert "reused 4 completed stage(s); 0 model(s) run again" in second.stdout
    with BoardStore(board_path) as store:
        reused = store.events_of_kind("reused")
        assert sorted((e.model_id, e.stage, e.data["attempt"]) for e in reused) == [
            ("t/bert", "adaptation", 1),
            ("t/bert", "discovery", 1),
            ("t/gpt2", "adaptation", 1),
            ("t/gpt2", "discovery", 1),
        ]

    config = models / "tiny-gpt2" / "config.json"  # the user changes one thing of one model
    data = json.loads(config.read_text())
    config.write_text(json.dumps({**data, "n_layer": data["n_layer"] + 1}, indent=2))
    demo = Path(os.environ["ASCENDBRIDGE_ADAPTATIONS"]) / "t__bert" / "demo.py"  # and edits a package by hand
    demo.write_text(demo.read_text() + "# edited\n")
    third = main_job(board_path, listing)
    assert third.returncode == 0, third.stdout[-3000:] + third.stderr[-3000:]
    assert "discovery: changed: the model's files" in third.stdout
    assert "adaptation: demo.py changed since its gate passed" in third.stdout
    assert "reused 1 completed stage(s); 2 model(s) run again: t/bert, t/gpt2" in third.stdout
    counts = attempt_counts(board_path)
    assert counts == {
        ("t/bert", "discovery"): 1,  # reused: its inputs did not change
        ("t/bert", "adaptation"): 2,  # its evidence did
        ("t/gpt2", "discovery"): 2,  # its config did: every stage from discovery on
        ("t/gpt2", "adaptation"): 2,
    }
    with BoardStore(board_path) as store:
        assert {t.status for t in store.list_tasks() if t.stage in STAGES.split(",")} == {"completed"}
        gpt2 = store.get_model("t/gpt2")
        assert gpt2.metadata or gpt2.architecture  # discovery ran on the new config
    assert "# edited" not in demo.read_text()  # adaptation rendered the package again


def _complete(store: BoardStore, model_id: str, stage: str, result: dict[str, object]) -> None:
    task = store.claim_task(store.list_tasks(stage, model_id=model_id)[0].id, "t", 60)
    store.complete_task(task.id, task.fencing_token, result)


def test_a_completion_without_a_record_or_a_hub_model_without_a_revision_runs_again(
    board: BoardStore, tmp_path: Path
) -> None:
    board.register_models([Registration(model_id="org/old", source="local", path=str(tmp_path))])
    board.register_models([Registration(model_id="org/hub")])
    _complete(board, "org/old", "discovery", {"summary": "done before re-runs were tracked"})
    hub = {"inputs": {"fingerprint": "x", "parts": {}, "package": {}}}
    _complete(board, "org/hub", "discovery", hub)
    decisions = {d.model_id: d for d in plan(board, {}, tmp_path / "adaptations")}
    assert decisions["org/old"].action == "rerun"
    assert decisions["org/old"].reason == "no inputs recorded (completed before re-runs were tracked)"
    assert decisions["org/hub"].action == "rerun"
    assert decisions["org/hub"].reason.startswith("a Hub model without a pinned revision")


def test_fresh_reruns_every_model_that_ran_anything(board: BoardStore, tmp_path: Path) -> None:
    board.register_models([Registration(model_id="org/ran"), Registration(model_id="org/new")])
    _complete(board, "org/ran", "discovery", {})
    decisions = plan(board, {}, tmp_path / "adaptations", fresh=True)
    assert [(d.model_id, d.stage, d.action, d.reason) for d in decisions] == [("org/ran", "discovery", "rerun", FRESH)]


def test_an_input_modified_after_the_attempt_started_makes_its_record_unstable(
    board: BoardStore, tmp_path: Path
) -> None:
    """The stage may have read either version of the file: its completion can never be reused."""
    from ascendbridge.reuse.inputs import UNSTABLE
    from ascendbridge.reuse.record import completion_record

    model_dir = tmp_path / "model"
    shutil.copytree(REPO / "demo_models" / "tiny-bert", model_dir)
    board.register_models([Registration(model_id="org/m", source="local", path=str(model_dir))])
    model = board.get_model("org/m")
    before = completion_record(model, "discovery", [], {}, tmp_path / "none", "2000-01-01T00:00:00+00:00")
    after = completion_record(model, "discovery", [], {}, tmp_path / "none", "2999-01-01T00:00:00+00:00")
    assert "changed while the attempt ran" in before["parts"][UNSTABLE]
    assert UNSTABLE not in after["parts"] and after["package"] == {}
