"""Read-only board queries for the dashboard: search, filters, sorting, pagination, aggregates.

The store answers "give me this record"; the dashboard also asks "which 50 of 10,000 models
match this search, sorted so" and "what is the success rate per task family". Those questions
are answered here, on a connection SQLite itself keeps read-only (`PRAGMA query_only`), so a bug
in a page can never change the board. Every read runs inside one deferred transaction: one
consistent WAL snapshot per question, and a reader never blocks the team lead's writes.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from sqlalchemy import Connection, Engine, create_engine, event, text

from ascendbridge.board.connection import BUSY_TIMEOUT_MS, BoardMissingError
from ascendbridge.board.records import loads
from ascendbridge.stages import STAGES, STATUSES, check_stage, check_status

# Sort keys a caller may ask for, mapped to SQL that only this module writes.
SORTS: dict[str, str] = {
    "priority": "m.priority",
    "model_id": "m.model_id",
    "created": "m.created_at",
    "stage": "COALESCE(cur.stage_order, 99)",
}
MAX_PER_PAGE = 200
_DONE_SQL = "('completed', 'skipped')"


class QueryError(ValueError):
    """A query parameter the caller must fix (unknown sort key, bad page number)."""


@dataclass(frozen=True)
class ModelRow:
    """One line of the overview table: where a model stands now."""

    model_id: str
    description: str
    priority: int
    paused: bool
    task_family: Optional[str]
    created_at: str
    current_stage: Optional[str]  # None when every stage is completed or skipped
    current_status: Optional[str]
    attempts: int
    updated_at: Optional[str]
    failure_reason: Optional[str]


@dataclass(frozen=True)
class ModelPage:
    items: list[ModelRow]
    total: int
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))


@dataclass(frozen=True)
class DurationStats:
    stage: str
    attempts: int
    median_s: Optional[float]
    p90_s: Optional[float]
    total_s: float


@dataclass
class Reports:
    """Aggregates for the reports page and the Prometheus endpoint."""

    success_by_stage: dict[str, dict[str, int]] = field(default_factory=dict)
    success_by_family: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    durations: list[DurationStats] = field(default_factory=list)
    speedups: list[tuple[str, float]] = field(default_factory=list)


def failure_reason(diagnosis_json: Optional[str]) -> Optional[str]:
    """The one-line reason a stage stopped, from its diagnosis (summary, else reason)."""
    diagnosis = loads(diagnosis_json)
    if not isinstance(diagnosis, dict):
        return None
    reason = diagnosis.get("summary") or diagnosis.get("reason")
    return str(reason) if reason else None


def _like(term: str) -> str:
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile: a value that was actually measured."""
    index = max(0, min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


class BoardQueries:
    """Read-only questions about one board file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise BoardMissingError(f"no board at {self.path}; create it with: scripts/board_ops.py init")
        self._engine = _read_only_engine(self.path)

    def close(self) -> None:
        self._engine.dispose()

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._engine.begin() as conn:
            yield conn

    # ------------------------------------------------------------------ overview
    def last_event_id(self) -> int:
        """Grows with every change on the board: cheap change detection for live pages."""
        with self._read() as conn:
            return int(conn.execute(text("SELECT COALESCE(MAX(id), 0) FROM events")).scalar_one())

    def search_models(
        self,
        q: str = "",
        stage: Optional[str] = None,
        status: Optional[str] = None,
        sort: str = "priority",
        descending: bool = True,
        page: int = 1,
        per_page: int = 50,
    ) -> ModelPage:
        """Filter and page the models.

        stage+status: that stage's task has that status (a funnel cell); stage alone: models
        currently at that stage; status alone: models with any stage in that status. `q` matches
        model id, description and failure reason (case-insensitive substring).
        """
        if stage:
            check_stage(stage)
        if status:
            check_status(status)
        if sort not in SORTS:
            raise QueryError(f"unknown sort '{sort}' (expected one of: {', '.join(SORTS)})")
        if page < 1:
            raise QueryError("page must be 1 or more")
        if not 1 <= per_page <= MAX_PER_PAGE:
            raise QueryError(f"per_page must be between 1 and {MAX_PER_PAGE}")
        where: list[str] = []
        params: dict[str, Any] = {}
        if q.strip():
            params["q"] = _like(q.strip())
            where.append(
                "(m.model_id LIKE :q ESCAPE '\\' OR m.description LIKE :q ESCAPE '\\' OR EXISTS ("
                "SELECT 1 FROM tasks t WHERE t.model_pk = m.id AND t.diagnosis_json LIKE :q ESCAPE '\\'))"
            )
        if stage and status:
            params.update(stage=stage, status=status)
            where.append("EXISTS (SELECT 1 FROM tasks t WHERE t.model_pk = m.id AND t.stage = :stage AND t.status = :status)")
        elif stage:
            params["stage"] = stage
            where.append("cur.stage = :stage")
        elif status:
            params["status"] = status
            where.append("EXISTS (SELECT 1 FROM tasks t WHERE t.model_pk = m.id AND t.status = :status)")
        current = (
            "LEFT JOIN tasks cur ON cur.id = (SELECT t.id FROM tasks t WHERE t.model_pk = m.id "
            f"AND t.status NOT IN {_DONE_SQL} ORDER BY t.stage_order LIMIT 1)"
        )
        where_sql = f"WHERE {' AND '.join(where)}" if where else ""
        direction = "DESC" if descending else "ASC"
        order_sql = f"ORDER BY {SORTS[sort]} {direction}, m.id ASC"
        params.update(limit=per_page, offset=(page - 1) * per_page)
        count_join = current if stage and not status else ""
        with self._read() as conn:
            total = conn.execute(
                text(f"SELECT COUNT(*) FROM models m {count_join} {where_sql}"), params
            ).scalar_one()
            rows = conn.execute(
                text(
                    "SELECT m.model_id, m.description, m.priority, m.paused, m.task_family, m.created_at, "
                    "cur.stage, cur.status, cur.attempts, cur.updated_at, cur.diagnosis_json "
                    f"FROM models m {current} {where_sql} {order_sql} LIMIT :limit OFFSET :offset"
                ),
                params,
            ).all()
        items = [
            ModelRow(
                model_id=r[0], description=r[1], priority=r[2], paused=bool(r[3]), task_family=r[4],
                created_at=r[5], current_stage=r[6], current_status=r[7], attempts=r[8] or 0,
                updated_at=r[9], failure_reason=failure_reason(r[10]),
            )
            for r in rows
        ]
        return ModelPage(items=items, total=int(total), page=page, per_page=per_page)

    def agent_tasks(self, task_ids: list[int]) -> dict[int, tuple[str, str]]:
        """task id -> (model id, stage), for showing what each agent works on."""
        if not task_ids:
            return {}
        marks = ", ".join(f":t{i}" for i in range(len(task_ids)))
        params = {f"t{i}": tid for i, tid in enumerate(task_ids)}
        with self._read() as conn:
            rows = conn.execute(
                text(f"SELECT t.id, m.model_id, t.stage FROM tasks t JOIN models m ON m.id = t.model_pk "
                     f"WHERE t.id IN ({marks})"),
                params,
            ).all()
        return {r[0]: (r[1], r[2]) for r in rows}

    # ------------------------------------------------------------------ aggregates
    def counts(self) -> dict[str, Any]:
        """Totals for /metrics: tasks per stage and status, attempts per stage and outcome."""
        with self._read() as conn:
            models = conn.execute(text("SELECT COUNT(*) FROM models")).scalar_one()
            tasks = conn.execute(text("SELECT stage, status, COUNT(*) FROM tasks GROUP BY stage, status")).all()
            attempts = conn.execute(
                text("SELECT t.stage, COALESCE(a.outcome, 'running'), COUNT(*), COALESCE(SUM(a.duration_s), 0) "
                     "FROM attempts a JOIN tasks t ON t.id = a.task_id GROUP BY t.stage, a.outcome")
            ).all()
            agents = conn.execute(text("SELECT status, COUNT(*) FROM agents GROUP BY status")).all()
            guidance = conn.execute(text("SELECT state, COUNT(*) FROM guidance GROUP BY state")).all()
            last_event = conn.execute(text("SELECT COALESCE(MAX(id), 0) FROM events")).scalar_one()
        return {
            "models": int(models),
            "tasks": [(r[0], r[1], int(r[2])) for r in tasks],
            "attempts": [(r[0], r[1], int(r[2]), float(r[3])) for r in attempts],
            "agents": [(r[0], int(r[1])) for r in agents],
            "guidance": [(r[0], int(r[1])) for r in guidance],
            "last_event_id": int(last_event),
        }

    def reports(self) -> Reports:
        """Success rates per stage and task family, attempt durations, the speedup distribution.

        Speedups come from board metrics named `speedup` (the optimization stage records them);
        the latest value per model counts.
        """
        out = Reports()
        with self._read() as conn:
            rows = conn.execute(
                text("SELECT COALESCE(m.task_family, 'unknown'), t.stage, t.status, COUNT(*) "
                     "FROM tasks t JOIN models m ON m.id = t.model_pk GROUP BY 1, 2, 3")
            ).all()
            durations = conn.execute(
                text("SELECT t.stage, a.duration_s FROM attempts a JOIN tasks t ON t.id = a.task_id "
                     "WHERE a.duration_s IS NOT NULL")
            ).all()
            speedups = conn.execute(
                text("SELECT m.model_id, x.value FROM metrics x JOIN models m ON m.id = x.model_pk "
                     "WHERE x.name = 'speedup' AND x.id = (SELECT MAX(y.id) FROM metrics y "
                     "WHERE y.model_pk = x.model_pk AND y.name = 'speedup') ORDER BY x.value")
            ).all()
        for stage in STAGES:
            out.success_by_stage[stage] = {s: 0 for s in STATUSES}
        for family, stage, status, n in rows:
            bucket = out.success_by_stage.setdefault(stage, {})
            bucket[status] = bucket.get(status, 0) + n
            fam = out.success_by_family.setdefault(family, {})
            fam.setdefault(stage, {})[status] = n
        by_stage: dict[str, list[float]] = {}
        for stage, seconds in durations:
            by_stage.setdefault(stage, []).append(float(seconds))
        for stage in STAGES:
            values = sorted(by_stage.get(stage, []))
            out.durations.append(
                DurationStats(
                    stage=stage,
                    attempts=len(values),
                    median_s=statistics.median(values) if values else None,
                    p90_s=_percentile(values, 0.9) if values else None,
                    total_s=sum(values),
                )
            )
        out.speedups = [(r[0], float(r[1])) for r in speedups]
        return out


def success_rate(status_counts: dict[str, int]) -> Optional[float]:
    """completed / (completed + failed + blocked); None before any stage has finished."""
    done = status_counts.get("completed", 0)
    finished = done + status_counts.get("failed", 0) + status_counts.get("blocked", 0)
    return done / finished if finished else None


def _read_only_engine(path: Path) -> Engine:
    engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": BUSY_TIMEOUT_MS / 1000,
                                                              "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _record: object) -> None:
        dbapi_conn.isolation_level = None  # SQLAlchemy's begin event issues BEGIN itself
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA query_only = ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN")

    return engine
