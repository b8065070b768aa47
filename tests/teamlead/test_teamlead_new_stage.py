"""A stage added as one package and its stage.toml, no kernel edit: a toy stage from a temporary
directory (its package, its stage.toml, and an installed distribution's metadata declaring its
`ascendbridge.stages` entry point) is scheduled, placed, gated, counted on the dashboard and told in
the main job's summary. Everything runs in subprocesses that find the toy on PYTHONPATH: the stage
table is read once per process, so this test's own process never sees the toy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from textwrap import dedent

import httpx
import pytest

from ascendbridge.board import BoardStore
from ascendbridge.stages import STAGES
from tests.dashboard.dash_support import served
from tests.teamlead.tl_support import run_tl

pytestmark = pytest.mark.slow  # a team-lead run and a dashboard server

TOY = "toy_room"

STAGE_PY = '''
"""A toy stage: its run writes evidence unless the model's description says "lie"; its gate checks it."""
from ascendbridge.stage_api import GateResult, StageContext, StageOutcome


class ToyRoom:
    name = "toy_room"

    def run(self, ctx: StageContext) -> StageOutcome:
        if ctx.model.description != "lie":
            (ctx.adaptation_dir / "toy_room.evidence").write_text(ctx.model.model_id)
        return StageOutcome("done", "toy room ran")

    def gate(self, ctx: StageContext) -> GateResult:
        found = (ctx.adaptation_dir / "toy_room.evidence").is_file()
        return GateResult(found, "evidence found" if found else "no evidence")


TOY_ROOM = ToyRoom()
'''

STAGE_TOML = """
name = "toy_room"
after = "{last}"
summary = "a toy stage added from a temporary package"
role = "toy-runner"
timeout_s = 120.0
attempts = 1
prompt_mode = "toy"
checkers = ["stage.py"]

[placement]
timed = true
"""


@pytest.fixture
def toy_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory on PYTHONPATH holding the toy package and the metadata of a distribution that
    declares it (what `pip install` of a third-party stage would leave)."""
    site = tmp_path / "site"
    (site / TOY).mkdir(parents=True)
    (site / TOY / "__init__.py").write_text("")
    (site / TOY / "stage.py").write_text(STAGE_PY)
    (site / TOY / "stage.toml").write_text(STAGE_TOML.format(last=STAGES[-1]))
    dist = site / "toy_room-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-room\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[ascendbridge.stages]\n{TOY} = {TOY}.stage:TOY_ROOM\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    return site


def _python(code: str) -> str:
    """Run `code` in a fresh interpreter (which sees the toy through PYTHONPATH); its stdout."""
    proc = subprocess.run([sys.executable, "-c", dedent(code)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_a_stage_from_its_own_package_runs_through_the_kernel_unedited(
    board: BoardStore, toy_site: Path, tmp_path: Path
) -> None:
    tables = json.loads(
        _python(
            """
            import json
            from ascendbridge.workers.placement import TIMED_STAGES
            from ascendbridge.stage_registry import STAGE_ROLES
            from ascendbridge.stages import STAGES
            from ascendbridge.teamlead.settings import DEFAULT_STAGE_TIMEOUT_S, PROMPT_MODES
            print(json.dumps({"stages": STAGES, "timed": sorted(TIMED_STAGES), "role": STAGE_ROLES["toy_room"],
                              "timeout": DEFAULT_STAGE_TIMEOUT_S["toy_room"], "mode": PROMPT_MODES["toy"]}))
            """
        )
    )
    assert tables["stages"] == [*STAGES, TOY]  # after the last stage, as its `after` says
    assert TOY in tables["timed"] and (tables["role"], tables["timeout"], tables["mode"]) == (
        "toy-runner",
        120.0,
        [TOY],
    )

    # Registered in a process that knows the toy: every model gets its task. The first stage runs
    # (a toy of its own), every other one is skipped by the models' policy.
    _python(
        f"""
        from ascendbridge.board import BoardStore, Registration
        from ascendbridge.stages import STAGES
        skip = [s for s in STAGES[1:] if s != "{TOY}"]
        BoardStore({str(board.path)!r}).register_models(
            Registration(model_id=m, source="local", path="/nonexistent", description=d, skip_stages=skip)
            for m, d in (("org/honest", ""), ("org/liar", "lie"))
        )
        """
    )
    first = f"{STAGES[0]}=tests.teamlead.toy_stages:{STAGES[0].upper()}"
    run = run_tl(board.path, tmp_path, "--stages", f"{STAGES[0]},{TOY}", "--workers", "2", extra=first)
    assert run.returncode == 1, run.stderr[-3000:]  # the liar's task failed
    tasks = {(t.model_id, t.stage): t for t in board.list_tasks()}
    assert tasks[("org/honest", TOY)].status == "completed"
    liar = tasks[("org/liar", TOY)]  # its run said done; its gate found no evidence; one attempt
    assert liar.status == "failed" and liar.attempts == 1, liar
    assert liar.diagnosis["rule"] == "gate_failed", liar.diagnosis
    placed = [e for e in board.list_events(limit=10**6) if e.kind == "placed" and e.stage == TOY]
    assert placed and all(e.data["exclusive"] for e in placed)  # a timed stage: cores of its own
    assert "toy-runner" in {a.role for a in board.list_agents()}

    summary = _python(
        f"""
        from pathlib import Path
        from rich.console import Console
        from ascendbridge.board import BoardStore
        from ascendbridge.run_summary import model_results, results_table
        from ascendbridge.stages import STAGES
        Console(width=300).print(results_table(model_results(BoardStore({str(board.path)!r}), STAGES, Path("a"))))
        """
    )
    assert f"all {len(STAGES) + 1} stages done" in summary and f"{TOY} failed" in summary

    logs, adaptations = tmp_path / "logs", tmp_path / "adaptations"
    with served(tmp_path, board.path, logs, adaptations) as url:
        overview = httpx.get(f"{url}/api/overview", timeout=10).json()
    row = next(r for r in overview["funnel"] if r["stage"] == TOY)
    assert (row["statuses"]["completed"], row["statuses"]["failed"]) == (1, 1)
