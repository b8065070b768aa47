"""What people watching a team-lead run see: a live progress bar and models x stages table, or
short plain lines.

With a terminal the view redraws in place: a bar with the tasks done, the running count and the
ETA, what the ETA rests on, then the table. Without one (CI, a log file, the watchdog) one short
line is logged every PLAIN_EVERY_S seconds (`progress: 12/64 stage tasks done (19%), 2 running,
ETA 47m10s`), then one line per running attempt with its last progress line and that line's age
(`running: acme/m0 benchmark attempt 1: accuracy (reference): sample 40/64, elapsed 3m10s,
4.8s/sample (12s ago)`, from the attempt's heartbeat: ascendbridge/workers/heartbeat.py), and what
the ETA rests on goes to the log file only. The live view shows the same running lines under the
bar. Every line recomputes the ETA
(teamlead/eta.py); a fault in that estimate is one warning and `ETA unavailable (...)`, never the
end of the run. After every finished attempt the board's costed attempts are re-read and, for the
product's own stages, written to the host's stage history (teamlead/history.py), the prior of
later boards.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from ascendbridge.board.records import utcnow
from ascendbridge.stages import TERMINAL_STATUSES
from ascendbridge.teamlead.eta import CostModel, Eta, Lanes, Sample, estimate
from ascendbridge.teamlead.history import HistoryError, HostHistory
from ascendbridge.workers.heartbeat import progress_text

if TYPE_CHECKING:
    from ascendbridge.teamlead.scheduler import TeamLead

PLAIN_EVERY_S = 30.0
LIVE_EVERY_S = 1.0
MAX_ROWS = 25
BAR_WIDTH = 40
FILE_ONLY = "file_only"  # a log record's extra: for the log file, not the screen (cli.setup_logging)
STYLE = {
    "completed": "green",
    "failed": "red",
    "blocked": "magenta",
    "skipped": "dim",
    "in_progress": "bold yellow",
    "pending": "cyan",
    "waiting": "dim",
}


def overall(lead: TeamLead, board: list[Sample], host: list[Sample], costs: CostModel) -> tuple[int, int, Eta]:
    """(terminal tasks, all tasks) over the selected stages, and the ETA of the rest: `board` the
    costed attempts on this board, `host` those on earlier boards of this host."""
    tasks = lead.store.list_tasks()
    selected = [t for t in tasks if t.stage in lead.settings.stages]
    done = sum(1 for t in selected if t.status in TERMINAL_STATUSES)
    runnable = [s for s in lead.settings.stages if s not in lead.stats.not_runnable]
    lanes = Lanes(lead.settings.workers, lead.pool.capacity, lead.settings.stage_limits, int(bool(lead.pool.lent_slot)))
    models = lead.store.list_models()
    try:
        eta = estimate(tasks, models, runnable, board, host, costs, lanes, utcnow())
    except Exception as exc:  # the ETA is advisory: a fault in it must not stop the run it describes
        eta = Eta(seconds=None, error=f"{type(exc).__name__}: {exc}")
    return done, len(selected), eta


def running_lines(lead: TeamLead) -> list[str]:
    """One line per running attempt: the model, the stage, which attempt, its last progress line."""
    jobs = sorted((job for job, _, _ in lead.jobs.values()), key=lambda job: job.task.id)
    return [f"running: {job.task.model_id} {job.stage} {job.what}: {progress_text(job.log_path)}" for job in jobs]


class Progress:
    """Called by the team lead once per loop; throttles its lines, never its bookkeeping."""

    def __init__(
        self,
        console: Console,
        log: logging.Logger,
        live: bool,
        read_attempts: Callable[[], list[tuple[str, str | None, float, int | None]]],
        history: HostHistory | None = None,
        costs: CostModel | None = None,
    ) -> None:
        self.console, self.log = console, log
        self.read_attempts = read_attempts  # the board's reporting part: not the scheduler's lease interface
        self.history = history
        self.costs = costs or CostModel.shipped(log)
        self.live: Live | None = Live(console=console, auto_refresh=False) if live else None
        self._last = 0.0
        self.samples: list[Sample] = []  # the board's costed attempts, as last read
        self._finished_seen = -1  # attempts finished when the board's attempts were last read
        self._host: list[Sample] | None = None  # the host's priors, read once per run
        self._eta_error: str | None = None  # the estimate's last fault, already warned about

    def state(self, lead: TeamLead) -> tuple[int, int, Eta]:
        """(tasks done, all tasks, the ETA) now; a new fault of the estimate is warned about once."""
        done, total, eta = overall(lead, self.samples, self.host_priors(), self.costs)
        if eta.error is not None and eta.error != self._eta_error:  # each new fault once, not every line
            self.log.warning("ETA: the estimate failed (%s); the run goes on without one", eta.error)
        self._eta_error = eta.error
        return done, total, eta

    @staticmethod
    def counts(done: int, total: int, running: int, eta: Eta) -> str:
        pct = 100.0 * done / total if total else 100.0
        return f"{done}/{total} stage tasks done ({pct:.0f}%), {running} running, {eta.short() if done < total else 'ETA 0s'}"

    def summary_line(self, lead: TeamLead) -> str:
        """The short line logged off a terminal (what the ETA rests on is logged to the file alone)."""
        done, total, eta = self.state(lead)
        return "progress: " + self.counts(done, total, len(lead.jobs), eta)

    def host_priors(self) -> list[Sample]:
        """Earlier boards' attempts on this host; a history file that cannot be used is ignored
        with one warning (the ETA then rests on the shipped cost model)."""
        if self._host is None:
            self._host = []
            if self.history is not None:
                try:
                    self._host = self.history.priors()
                except HistoryError as exc:
                    self.log.warning("ETA: %s; ignored (the next finished attempt rewrites it)", exc)
        return self._host

    def refresh(self, lead: TeamLead) -> None:
        """After an attempt finished: re-read the board's costed attempts, and record those of the
        product's own stages (entry points, not a test's stand-ins) as this board's history entry."""
        finished = sum(n for k, n in lead.stats.outcomes.items() if k != "dispatched")
        if finished == self._finished_seen:
            return
        self._finished_seen = finished
        self.samples = [Sample(*row) for row in self.read_attempts()]
        if self.history is None or finished == 0:
            return
        own = {name for name, ref in lead.refs.items() if ref.source == "entry-point"}
        mine = [s for s in self.samples if s.stage in own]
        if not mine:  # a board of stand-ins only: no entry that would push a real board out
            return
        try:
            self.history.record(mine)
        except OSError as exc:
            self.log.warning("ETA: cannot write the stage history %s: %s", self.history.path, exc)
            self.history = None  # once per run is enough

    def __enter__(self) -> Progress:
        if self.live:
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.live.stop()

    def __call__(self, lead: TeamLead, force: bool = False) -> None:
        self.refresh(lead)
        now = time.monotonic()
        every = LIVE_EVERY_S if self.live else PLAIN_EVERY_S
        if force and not self.live:
            return  # plain mode: the summary table that follows says it all
        if now - self._last < every and not force:
            return
        self._last = now
        if self.live:
            self.live.update(self.render(lead), refresh=True)
            return
        done, total, eta = self.state(lead)
        self.log.info("progress: %s", self.counts(done, total, len(lead.jobs), eta))
        for line in running_lines(lead):
            self.log.info("%s", line)
        if done < total and eta.error is None:
            self.log.info("%s", eta.text(), extra={FILE_ONLY: True})  # "ETA 47m10s [what it rests on]"

    def render(self, lead: TeamLead) -> Group:
        stages = lead.settings.stages
        table = Table(title=None, expand=False)
        table.add_column("model")
        for stage in stages:
            table.add_column(stage)
        by_model: dict[str, dict[str, str]] = {}
        for task in lead.store.list_tasks():
            if task.stage in stages:
                by_model.setdefault(task.model_id, {})[task.stage] = task.status

        # Models with work in flight first, then unfinished ones, then finished ones.
        def rank(item: tuple[str, dict[str, str]]) -> int:
            statuses = item[1].values()
            return 0 if "in_progress" in statuses else (2 if all(s in TERMINAL_STATUSES for s in statuses) else 1)

        rows = sorted(by_model.items(), key=rank)
        for model_id, per_stage in rows[:MAX_ROWS]:
            table.add_row(
                model_id, *(Text(per_stage.get(st, "-"), style=STYLE.get(per_stage.get(st, ""), "")) for st in stages)
            )
        more = f" (+{len(rows) - MAX_ROWS} more models)" if len(rows) > MAX_ROWS else ""
        done, total, eta = self.state(lead)
        bar = Table.grid(padding=(0, 1))
        bar.add_row(
            ProgressBar(total=total or 1, completed=done if total else 1, width=BAR_WIDTH),
            Text(self.counts(done, total, len(lead.jobs), eta) + more, style="bold"),
        )
        basis = eta.basis() if done < total and eta.error is None else ""
        above = [Text(f"ETA basis: {basis}", style="dim")] if basis else []
        above += [Text(line, style="yellow") for line in running_lines(lead)]
        return Group(bar, *above, table)
