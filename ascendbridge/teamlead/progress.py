"""What people watching a team-lead run see: a live models x stages table, or plain lines.

With a terminal the table redraws in place (overall percent and ETA on top); without one
(CI, a log file, the watchdog) a progress line is logged every PLAIN_EVERY_S seconds instead.
"""

from __future__ import annotations

import logging
import statistics
import time
from typing import TYPE_CHECKING, Optional

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ascendbridge.stages import TERMINAL_STATUSES

if TYPE_CHECKING:
    from ascendbridge.teamlead.scheduler import TeamLead

PLAIN_EVERY_S = 30.0
LIVE_EVERY_S = 1.0
MAX_ROWS = 25
STYLE = {"completed": "green", "failed": "red", "blocked": "magenta", "skipped": "dim",
         "in_progress": "bold yellow", "pending": "cyan", "waiting": "dim"}


def _fmt_s(seconds: Optional[float]) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def overall(lead: "TeamLead") -> tuple[int, int, Optional[float]]:
    """(terminal tasks, all tasks) over the selected stages, and an ETA in seconds."""
    counts = lead.store.status_counts()
    total = done = 0
    for stage in lead.settings.stages:
        for status, n in counts.get(stage, {}).items():
            total += n
            done += n if status in TERMINAL_STATUSES else 0
    eta = None
    if lead.stats.durations:
        per_task = statistics.median(lead.stats.durations)
        eta = per_task * (total - done) / max(1, lead.settings.workers)
    return done, total, eta


def summary_line(lead: "TeamLead") -> str:
    done, total, eta = overall(lead)
    pct = 100.0 * done / total if total else 100.0
    return (f"progress: {done}/{total} stage tasks finished ({pct:.0f}%), {len(lead.jobs)} running, "
            f"ETA {_fmt_s(eta) if done < total else '0s'}")


class Progress:
    """Called by the team lead once per loop; throttles itself."""

    def __init__(self, console: Console, log: logging.Logger, live: bool) -> None:
        self.console, self.log = console, log
        self.live: Optional[Live] = Live(console=console, auto_refresh=False) if live else None
        self._last = 0.0

    def __enter__(self) -> "Progress":
        if self.live:
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.live.stop()

    def __call__(self, lead: "TeamLead", force: bool = False) -> None:
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
            self.log.info(summary_line(lead))

    def render(self, lead: "TeamLead") -> Group:
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
        return Group(Text(summary_line(lead) + more, style="bold"), table)
