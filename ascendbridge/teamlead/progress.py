"""What people watching a team-lead run see: a live models x stages table, or plain lines.

With a terminal the table redraws in place (overall percent and ETA on top); without one
(CI, a log file, the watchdog) a progress line is logged every PLAIN_EVERY_S seconds instead.
Every line recomputes the ETA (teamlead/eta.py) and shows what it rests on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ascendbridge.board.records import utcnow
from ascendbridge.stages import TERMINAL_STATUSES
from ascendbridge.teamlead.eta import Eta, concurrency, estimate

if TYPE_CHECKING:
    from ascendbridge.teamlead.scheduler import TeamLead

PLAIN_EVERY_S = 30.0
LIVE_EVERY_S = 1.0
MAX_ROWS = 25
STYLE = {"completed": "green", "failed": "red", "blocked": "magenta", "skipped": "dim",
         "in_progress": "bold yellow", "pending": "cyan", "waiting": "dim"}


def overall(lead: TeamLead, durations: dict[str, list[float]]) -> tuple[int, int, Eta]:
    """(terminal tasks, all tasks) over the selected stages, and the ETA of the rest."""
    tasks = [t for t in lead.store.list_tasks() if t.stage in lead.settings.stages]
    done = sum(1 for t in tasks if t.status in TERMINAL_STATUSES)
    runnable = [s for s in lead.settings.stages if s not in lead.stats.not_runnable]
    workers = concurrency(runnable, lead.settings.workers, lead.settings.stage_limits, lead.pool.capacity)
    eta = estimate(tasks, runnable, durations, workers, utcnow())
    return done, len(tasks), eta


def summary_line(lead: TeamLead, durations: dict[str, list[float]]) -> str:
    done, total, eta = overall(lead, durations)
    pct = 100.0 * done / total if total else 100.0
    return (f"progress: {done}/{total} stage tasks finished ({pct:.0f}%), {len(lead.jobs)} running, "
            f"{eta.text() if done < total else 'ETA 0s'}")


class Progress:
    """Called by the team lead once per loop; throttles itself."""

    def __init__(self, console: Console, log: logging.Logger, live: bool,
                 read_durations: Callable[[], dict[str, list[float]]]) -> None:
        self.console, self.log = console, log
        self.read_durations = read_durations  # the board's reporting part: not the scheduler's lease interface
        self.live: Live | None = Live(console=console, auto_refresh=False) if live else None
        self._last = 0.0
        self._durations: dict[str, list[float]] = {}
        self._finished_seen = -1  # attempts finished when the durations were last read

    def durations(self, lead: TeamLead) -> dict[str, list[float]]:
        """The board's completed-attempt durations, re-read only after an attempt finished."""
        finished = sum(n for k, n in lead.stats.outcomes.items() if k != "dispatched")
        if finished != self._finished_seen:
            self._durations = self.read_durations()
            self._finished_seen = finished
        return self._durations

    def __enter__(self) -> Progress:
        if self.live:
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.live.stop()

    def __call__(self, lead: TeamLead, force: bool = False) -> None:
        now = time.monotonic()
        every = LIVE_EVERY_S if self.live else PLAIN_EVERY_S
        if force and not self.live:
            return  # plain mode: the summary table that follows says it all
        if now - self._last < every and not force:
            return
        self._last = now
        if self.live:
            self.live.update(self.render(lead), refresh=True)
        else:
            self.log.info(summary_line(lead, self.durations(lead)))

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
            table.add_row(model_id, *(Text(per_stage.get(st, "-"), style=STYLE.get(per_stage.get(st, ""), ""))
                                      for st in stages))
        more = f" (+{len(rows) - MAX_ROWS} more models)" if len(rows) > MAX_ROWS else ""
        return Group(Text(summary_line(lead, self.durations(lead)) + more, style="bold"), table)
