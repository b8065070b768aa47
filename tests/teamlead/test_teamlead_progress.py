"""What a person watching the team lead sees: a bar with the ETA on a terminal, one short line off it,
and each running attempt's last progress line."""

from __future__ import annotations

import io
import logging
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from ascendbridge.board import BoardStore, Registration
from ascendbridge.stage_registry import StageRef
from ascendbridge.teamlead.eta import CostModel
from ascendbridge.teamlead.progress import BAR_WIDTH, FILE_ONLY, Progress
from ascendbridge.teamlead.scheduler import RunStats
from ascendbridge.teamlead.settings import TeamLeadSettings
from ascendbridge.workers.devices import detect
from ascendbridge.workers.executor import Job, LocalProcessExecutor
from ascendbridge.workers.heartbeat import last_progress
from ascendbridge.workers.placement import DevicePool
from tests.support.fake_devices import fake_runner
from tests.teamlead.tl_support import add_models, wait_for

COSTS = CostModel({"discovery": {"*": 10.0}, "adaptation": {"*": 20.0}})
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
LINE = "1/6 stage tasks done (17%), 0 running, ETA "
TOY_DISCOVERY = "tests.teamlead.toy_stages:DISCOVERY"


@pytest.fixture()
def lead(tmp_path: Path) -> SimpleNamespace:
    """The parts of a team lead Progress reads, over a real board: 3 models, one discovered."""
    store = BoardStore.init(tmp_path / "board.db")
    store.register_models([Registration(model_id=f"acme/m{i}") for i in range(3)])
    task = store.claim_task(store.list_tasks("discovery", model_id="acme/m0")[0].id, "w", 60)
    store.complete_task(task.id, task.fencing_token, {})
    pool = DevicePool(detect(None, fake_runner(), cpus=(0, 1), host="h"))
    settings = TeamLeadSettings(stages=("discovery", "adaptation"))
    yield SimpleNamespace(store=store, settings=settings, pool=pool, stats=RunStats(), jobs={}, refs={})
    store.close()


def board_attempts() -> list[tuple[str, str | None, float, int | None]]:
    return [("discovery", None, 12.0, None)]


def test_a_terminal_shows_a_bar_with_the_eta(lead: SimpleNamespace) -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    with Progress(console, logging.getLogger("test-progress"), True, board_attempts, costs=COSTS) as progress:
        progress(lead, force=True)  # type: ignore[arg-type]  # the parts Progress reads
    lines = ANSI.sub("", out.getvalue()).splitlines()
    bar = next(line for line in lines if LINE in line)
    assert re.fullmatch(f"[━╸╺]{{{BAR_WIDTH}}} " + re.escape(LINE) + r"\d+s", bar.rstrip()), bar
    basis = next(line for line in lines if line.startswith("ETA basis: "))  # what the ETA rests on, under the bar
    assert "discovery 11s x2 (median of 1 here and its prior)" in basis and "adaptation ~24s x3" in basis
    assert any("acme/m0" in line and "completed" in line for line in lines)  # the models x stages table


def test_off_a_terminal_one_short_line_and_the_eta_basis_for_the_log_file_only(
    lead: SimpleNamespace, caplog: pytest.LogCaptureFixture
) -> None:
    out = io.StringIO()
    progress = Progress(
        Console(file=out, force_terminal=False), logging.getLogger("test-progress"), False, board_attempts, costs=COSTS
    )
    with caplog.at_level(logging.INFO, logger="test-progress"):
        progress(lead)  # type: ignore[arg-type]  # the parts Progress reads
        progress(lead)  # type: ignore[arg-type]  # within PLAIN_EVERY_S: nothing more
    screen = [r.getMessage() for r in caplog.records if not getattr(r, FILE_ONLY, False)]
    file_only = [r.getMessage() for r in caplog.records if getattr(r, FILE_ONLY, False)]
    assert len(screen) == 1 and re.fullmatch(r"progress: " + re.escape(LINE) + r"\d+s", screen[0]), screen
    assert len(screen[0]) < 80
    assert (
        len(file_only) == 1 and file_only[0].startswith("ETA ") and "discovery 11s x2 (median of 1 here" in file_only[0]
    )
    assert out.getvalue() == ""  # no bar, no live view


def test_a_running_attempts_last_progress_line_is_in_the_progress_output(
    lead: SimpleNamespace, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A real worker runs a toy stage that reports three steps and then waits in its fourth: its
    heartbeat (the last progress line, beside the attempt log) is what the team lead shows for the
    running task, on a terminal and off one; its attempt log holds the lines themselves."""
    add_models(lead.store, {"acme/slow": {"discovery": "progress:3"}})
    task = lead.store.claim_task(lead.store.list_tasks("discovery", model_id="acme/slow")[0].id, "test-owner", 60)
    job = Job(
        task=task,
        model=lead.store.get_model("acme/slow"),
        ref=StageRef("discovery", TOY_DISCOVERY, "env"),
        worker_id="test.w1",
        adaptation_dir=tmp_path / "adaptations" / task.adaptation_name,
        board_path=lead.store.path,
        log_path=tmp_path / "logs" / task.adaptation_name / "discovery" / "attempt-1.log",
        timeout_s=120,
        gate_timeout_s=60,
        lease_s=60,
        heartbeat_s=5,
        output_cap=1 << 20,
        extra_stages=f"discovery={TOY_DISCOVERY}",
    )
    executor = LocalProcessExecutor()
    executor.submit(job)
    try:
        wait_for(lambda: "step 3/4" in str(last_progress(job.log_path)), 120, what="the toy's third step")
        lead.jobs[task.id] = (job, 0, 0)
        plain = Progress(
            Console(file=io.StringIO()), logging.getLogger("test-progress"), False, board_attempts, costs=COSTS
        )
        with caplog.at_level(logging.INFO, logger="test-progress"):
            plain(lead)  # type: ignore[arg-type]  # the parts Progress reads
        running = [r.getMessage() for r in caplog.records if r.getMessage().startswith("running: ")]
        assert len(running) == 1 and re.fullmatch(
            r"running: acme/slow discovery attempt 1: toy work: step 3/4, elapsed \d+s, [^()]+ \(working\) \(\d+s ago\)",
            running[0],
        ), running
        out = io.StringIO()
        console = Console(file=out, force_terminal=True, width=200)
        with Progress(console, logging.getLogger("test-progress"), True, board_attempts, costs=COSTS) as live:
            live(lead, force=True)  # type: ignore[arg-type]  # the parts Progress reads
        assert "running: acme/slow discovery attempt 1: toy work: step 3/4, elapsed" in ANSI.sub("", out.getvalue())
    finally:
        (job.work_dir / "release").touch()
        [result] = executor.collect(120)
    assert result.run is not None and result.run.data is not None and result.run.data.status == "done"
    log = job.log_path.read_text()
    assert "progress: toy work: step 0/4, started\n" in log
    assert re.search(r"progress: toy work: step 4/4, elapsed \d+s, [^\n]+, done\n", log), log
    beat = last_progress(job.log_path)
    assert beat is not None and beat.line.startswith("toy work: step 4/4") and ", done" in beat.line
