"""Read-only board queries for the dashboard: search, filters, sorting, pagination, aggregates.

The store answers "give me this record"; the dashboard also asks "which 50 of 10,000 models
match this search, sorted so" and "what is the success rate per task family". Those questions
are answered here, on a connection SQLite itself keeps read-only (`PRAGMA query_only`), so a bug
in a page can never change the board. Every read runs inside one deferred transaction: one
consistent WAL snapshot per question, and a reader never blocks the team lead's writes.
"""

from __future__ import annotations

import os
import statistics
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, text

from ab_runtime.pairstats import percentile
from ascendbridge.board.connection import BoardMissingError, read_only_engine
from ascendbridge.board.records import loads
from ascendbridge.stages import DONE_STATUSES, STAGES, STATUSES, check_stage, check_status

# Sort keys a caller may ask for, mapped to SQL that only this module writes.
SORTS: dict[str, str] = {
    "priority": "m.priority",
    "model_id": "m.model_id",
    "created": "m.created_at",
    "stage": "COALESCE(cur.stage_order, 99)",
}
MAX_PER_PAGE = 200
CACHE_ENTRIES = 256
_DONE_SQL = "('completed', 'skipped')"
_ACTIVE_SQL = "('pending', 'in_progress', 'failed', 'blocked')"
_STOPPED_SQL = "('failed', 'blocked', 'skipped')"  # tasks whose diagnosis is a failure reason
# The benchmark stage's workload figures (benchmark/stage.py board_figures) shown across models.
WORKLOAD_FIGURES = (
    "ttft_ms",
    "tpot_ms",
    "tokens_per_s",
    "batch_tokens_per_s",
    "decode_bandwidth_gbs",
    "decode_bandwidth_pct",
    "throughput_samples_per_s",
    "knee_samples_per_s",
    "batch1_latency_ms",
    "workload_peak_memory_bytes",
)
# Naming every stage lets SQLite use the (stage, status) index for a status-only condition.
_STAGES_SQL = ", ".join(f"'{x}'" for x in STAGES)


class QueryError(ValueError):
    """A query parameter the caller must fix (unknown sort key, bad page number)."""


@dataclass(frozen=True)
class ModelRow:
    """One line of the overview table: where a model stands now."""

    model_id: str
    description: str
    priority: int
    paused: bool
    task_family: str | None
    created_at: str
    current_stage: str | None  # first unfinished stage, else the last completed one
    current_status: str | None
    attempts: int
    updated_at: str | None
    failure_reason: str | None


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
    median_s: float | None
    p90_s: float | None
    total_s: float


@dataclass
class Reports:
    """Aggregates for the reports page and the Prometheus endpoint."""

    success_by_stage: dict[str, dict[str, int]] = field(default_factory=dict)
    success_by_family: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    durations: list[DurationStats] = field(default_factory=list)
    speedups: list[tuple[str, float]] = field(default_factory=list)


def failure_reason(diagnosis_json: str | None) -> str | None:
    """The one-line reason a stage stopped, from its diagnosis (summary, else reason)."""
    diagnosis = loads(diagnosis_json)
    if not isinstance(diagnosis, dict):
        return None
    reason = diagnosis.get("summary") or diagnosis.get("reason")
    return str(reason) if reason else None


def _like(term: str) -> str:
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class BoardQueries:
    """Read-only questions about one board file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Open a read-only connection pool on an existing board; answers are cached per event id."""
        self.path = Path(path)
        if not self.path.is_file():
            raise BoardMissingError(f"no board at {self.path}; create it with: scripts/board_ops.py init")
        self._engine = read_only_engine(self.path)
        self._cache: dict[tuple[Any, ...], tuple[int, Any]] = {}
        self._cache_lock = threading.Lock()

    def close(self) -> None:
        self._engine.dispose()

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._engine.begin() as conn:
            yield conn

    def _cached(self, conn: Connection, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        """Reuse an answer while no event has been appended since it was computed.

        Sound for what models and tasks show: every change to a model or a task's status,
        attempts, owner or diagnosis appends an event in the same transaction (store.py), and
        the event id is read in the same snapshot as the answer.
        """
        version = int(conn.execute(text("SELECT COALESCE(MAX(id), 0) FROM events")).scalar_one())
        with self._cache_lock:
            hit = self._cache.get(key)
        if hit is not None and hit[0] == version:
            return hit[1]
        value = compute()
        with self._cache_lock:
            if len(self._cache) >= CACHE_ENTRIES:
                self._cache.clear()
            self._cache[key] = (version, value)
        return value

    # ------------------------------------------------------------------ overview
    def status_counts(self) -> dict[str, dict[str, int]]:
        """stage -> status -> count (the funnel), every stage and status present."""
        with self._read() as conn:

            def compute() -> dict[str, dict[str, int]]:
                counts = {stage: {status: 0 for status in STATUSES} for stage in STAGES}
                rows = _rows(conn, "SELECT stage, status, COUNT(*) FROM tasks GROUP BY stage, status")
                for stage, status, n in rows:
                    counts.setdefault(stage, {})[status] = int(n)
                return counts

            return self._cached(conn, ("status_counts",), compute)

    def last_event_id(self) -> int:
        """Grows with every change on the board: cheap change detection for live pages."""
        with self._read() as conn:
            return int(conn.execute(text("SELECT COALESCE(MAX(id), 0) FROM events")).scalar_one())

    def search_models(
        self,
        q: str = "",
        stage: str | None = None,
        status: str | None = None,
        sort: str = "priority",
        descending: bool = True,
        page: int = 1,
        per_page: int = 50,
    ) -> ModelPage:
        """Filter and page the models.

        stage+status: that stage's task has that status (a funnel cell); stage alone: models
        currently at that stage (pending, running, failed or blocked there); status alone: models
        with any stage in that status. `q` matches model id, description and the failure reason
        of failed, blocked or skipped stages (case-insensitive substring).
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
        where, params = self._model_filters(q, stage, status)
        where_sql = f"WHERE {' AND '.join(where)}" if where else ""
        direction = "DESC" if descending else "ASC"
        # Sorting by progress needs every model's current stage; the other sorts only the page's.
        progress = (
            "LEFT JOIN (SELECT model_pk, MIN(stage_order) AS stage_order FROM tasks "
            f"WHERE status NOT IN {_DONE_SQL} GROUP BY model_pk) cur ON cur.model_pk = m.id"
            if sort == "stage"
            else ""
        )

        def compute(conn: Connection) -> ModelPage:
            total: int = conn.execute(text(f"SELECT COUNT(*) FROM models m {where_sql}"), params).scalar_one()
            rows = conn.execute(
                text(
                    "SELECT m.id, m.model_id, m.description, m.priority, m.paused, m.task_family, m.created_at "
                    f"FROM models m {progress} {where_sql} "
                    f"ORDER BY {SORTS[sort]} {direction}, m.id ASC LIMIT :limit OFFSET :offset"
                ),
                {**params, "limit": per_page, "offset": (page - 1) * per_page},
            ).all()
            current = self._current_tasks(conn, [r[0] for r in rows])
            items = []
            for r in rows:
                cur = current.get(r[0])
                items.append(
                    ModelRow(
                        model_id=r[1],
                        description=r[2],
                        priority=r[3],
                        paused=bool(r[4]),
                        task_family=r[5],
                        created_at=r[6],
                        current_stage=cur[0] if cur else None,
                        current_status=cur[1] if cur else None,
                        attempts=cur[2] if cur else 0,
                        updated_at=cur[3] if cur else None,
                        failure_reason=failure_reason(cur[4]) if cur else None,
                    )
                )
            return ModelPage(items=items, total=int(total), page=page, per_page=per_page)

        key = ("search", q, stage, status, sort, descending, page, per_page)
        with self._read() as conn:
            return self._cached(conn, key, lambda: compute(conn))

    @staticmethod
    def _model_filters(q: str, stage: str | None, status: str | None) -> tuple[list[str], dict[str, Any]]:
        """WHERE clauses on `models m`, each an indexed sub-select over tasks (no per-row scans)."""
        where: list[str] = []
        params: dict[str, Any] = {}
        if q.strip():
            params["q"] = _like(q.strip())
            where.append(
                "(m.model_id LIKE :q ESCAPE '\\' OR m.description LIKE :q ESCAPE '\\' OR m.id IN ("
                f"SELECT model_pk FROM tasks WHERE stage IN ({_STAGES_SQL}) AND status IN {_STOPPED_SQL} "
                "AND diagnosis_json LIKE :q ESCAPE '\\'))"
            )
        if stage and status:
            params.update(stage=stage, status=status)
            where.append("m.id IN (SELECT model_pk FROM tasks WHERE stage = :stage AND status = :status)")
        elif stage:
            # A stage is pending, running, failed or blocked only once every earlier stage is done,
            # so "currently at" is one lookup in the (stage, status) index.
            params["stage"] = stage
            where.append(f"m.id IN (SELECT model_pk FROM tasks WHERE stage = :stage AND status IN {_ACTIVE_SQL})")
        elif status:
            params["status"] = status
            where.append(f"m.id IN (SELECT model_pk FROM tasks WHERE stage IN ({_STAGES_SQL}) AND status = :status)")
        return where, params

    @staticmethod
    def _current_tasks(conn: Connection, model_pks: list[int]) -> dict[int, tuple[Any, ...]]:
        """model pk -> (stage, status, attempts, updated_at, diagnosis_json) of where it stands.

        The stage is the first unfinished one, or, once every stage is done, the last stage that
        ran (completed); attempts count every stage's attempts and updated_at is the latest
        change, so a finished model reads "optimization completed, 5 attempts, 08:03", not blank.
        """
        if not model_pks:
            return {}
        marks = ", ".join(f":p{i}" for i in range(len(model_pks)))
        rows = conn.execute(
            text(
                "SELECT model_pk, stage, status, attempts, updated_at, diagnosis_json FROM tasks "
                f"WHERE model_pk IN ({marks}) ORDER BY model_pk, stage_order"
            ),
            {f"p{i}": pk for i, pk in enumerate(model_pks)},
        ).all()
        by_model: dict[int, list[Any]] = {}
        for row in rows:
            by_model.setdefault(row[0], []).append(row)
        out: dict[int, tuple[Any, ...]] = {}
        for pk, tasks in by_model.items():
            unfinished = [t for t in tasks if t[2] not in DONE_STATUSES]
            ran = [t for t in tasks if t[2] == "completed"]
            cur = unfinished[0] if unfinished else (ran[-1] if ran else tasks[-1])
            attempts = sum(int(t[3] or 0) for t in tasks)
            updated = max((t[4] for t in tasks if t[4]), default=None)
            out[pk] = (cur[1], cur[2], attempts, updated, cur[5])
        return out

    def agent_tasks(self, task_ids: list[int]) -> dict[int, tuple[str, str]]:
        """task id -> (model id, stage), for showing what each agent works on."""
        if not task_ids:
            return {}
        marks = ", ".join(f":t{i}" for i in range(len(task_ids)))
        params = {f"t{i}": tid for i, tid in enumerate(task_ids)}
        with self._read() as conn:
            rows = conn.execute(
                text(
                    f"SELECT t.id, m.model_id, t.stage FROM tasks t JOIN models m ON m.id = t.model_pk "
                    f"WHERE t.id IN ({marks})"
                ),
                params,
            ).all()
        return {r[0]: (r[1], r[2]) for r in rows}

    # ------------------------------------------------------------------ aggregates
    def counts(self) -> dict[str, Any]:
        """Totals for /metrics: tasks per stage and status, attempts per stage and outcome."""
        with self._read() as conn:
            models: int = conn.execute(text("SELECT COUNT(*) FROM models")).scalar_one()
            tasks = conn.execute(text("SELECT stage, status, COUNT(*) FROM tasks GROUP BY stage, status")).all()
            attempts = conn.execute(
                text(
                    "SELECT t.stage, COALESCE(a.outcome, 'running'), COUNT(*), COALESCE(SUM(a.duration_s), 0) "
                    "FROM attempts a JOIN tasks t ON t.id = a.task_id GROUP BY t.stage, a.outcome"
                )
            ).all()
            agents = conn.execute(text("SELECT status, COUNT(*) FROM agents GROUP BY status")).all()
            guidance = conn.execute(text("SELECT state, COUNT(*) FROM guidance GROUP BY state")).all()
            last_event: int = conn.execute(text("SELECT COALESCE(MAX(id), 0) FROM events")).scalar_one()
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
            rows = _rows(
                conn,
                "SELECT COALESCE(m.task_family, 'unknown'), t.stage, t.status, COUNT(*) "
                "FROM tasks t JOIN models m ON m.id = t.model_pk GROUP BY 1, 2, 3",
            )
            durations = _rows(
                conn,
                "SELECT t.stage, a.duration_s FROM attempts a JOIN tasks t ON t.id = a.task_id "
                "WHERE a.duration_s IS NOT NULL",
            )
            speedups = _latest_speedups(conn)
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
                    p90_s=percentile(values, 90) if values else None,
                    total_s=sum(values),
                )
            )
        out.speedups = speedups
        return out

    def _latest_figures(self, stage: str, model_ids: list[str] | None) -> list[tuple[str, str, float, str, str]]:
        """(model_id, name, value, device, dtype) of each name's newest gated figure of `stage`."""
        sql = (
            "SELECT m.model_id, x.name, x.value, x.device, x.dtype FROM metrics x "
            "JOIN models m ON m.id = x.model_pk WHERE x.stage = :stage AND x.id = "
            "(SELECT MAX(y.id) FROM metrics y WHERE y.model_pk = x.model_pk AND y.stage = x.stage "
            "AND y.name = x.name)"
        )
        params: dict[str, Any] = {"stage": stage}
        if model_ids is not None:
            if not model_ids:
                return []
            names = [f"id{i}" for i in range(len(model_ids))]
            sql += f" AND m.model_id IN ({', '.join(':' + n for n in names)})"
            params.update(zip(names, model_ids))
        with self._read() as conn:
            return _rows(conn, sql + " ORDER BY m.model_id, x.name", params)

    def business_results(self, model_ids: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """The latest business_benchmark figures per model: {model_id: {"verdict", "weights",
        "device", "dtype", "metrics": {name: value}}} (the stage records `business_pass`,
        `real_weights` and `<set>.<metric>` values; each name's newest value counts)."""
        out: dict[str, dict[str, Any]] = {}
        for model_id, name, value, device, dtype in self._latest_figures("business_benchmark", model_ids):
            entry = out.setdefault(
                model_id, {"verdict": None, "weights": None, "device": device, "dtype": dtype, "metrics": {}}
            )
            if name == "business_pass":
                entry["verdict"] = "pass" if value >= 1.0 else "fail"
            elif name == "real_weights":
                entry["weights"] = "real" if value >= 1.0 else "config-initialised (agreement only)"
            else:
                entry["metrics"][name] = float(value)
        return out

    def training_results(self, model_ids: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """The latest gated training figures per model: {model_id: {"device", "dtype" (the
        precision), "metrics": {name: value}}} (training/figures.py names them)."""
        out: dict[str, dict[str, Any]] = {}
        for model_id, name, value, device, dtype in self._latest_figures("training", model_ids):
            out.setdefault(model_id, {"device": device, "dtype": dtype, "metrics": {}})["metrics"][name] = float(value)
        return out

    def workload_results(self) -> list[dict[str, Any]]:
        """The gated workload figures across models, one row per model and benchmarked device /
        dtype: {"model_id", "device", "dtype", "figures": {name: value}} (the benchmark stage's
        TTFT / TPOT / tokens/s / decode bandwidth, or sweep throughput and knee; the newest value of
        each name counts), with the model's latest `speedup` (the optimization stage's, as in reports)."""
        names = ", ".join(f"'{n}'" for n in WORKLOAD_FIGURES)
        sql = (
            "SELECT m.model_id, x.device, x.dtype, x.name, x.value FROM metrics x "
            "JOIN models m ON m.id = x.model_pk WHERE x.stage = 'benchmark' AND x.name IN (" + names + ") "
            "AND x.id = (SELECT MAX(y.id) FROM metrics y WHERE y.model_pk = x.model_pk AND y.stage = x.stage "
            "AND y.name = x.name AND y.device = x.device AND y.dtype = x.dtype)"
        )
        rows: dict[tuple[str, str, str], dict[str, float]] = {}
        with self._read() as conn:
            for model_id, device, dtype, name, value in _rows(conn, sql):
                rows.setdefault((model_id, device, dtype), {})[name] = float(value)
            speedups = dict(_latest_speedups(conn))
        return [
            {"model_id": m, "device": device, "dtype": dtype, "figures": figures, "speedup": speedups.get(m)}
            for (m, device, dtype), figures in sorted(rows.items())
        ]


def _latest_speedups(conn: Connection) -> list[tuple[str, float]]:
    """(model id, latest `speedup` metric) per model, slowest first."""
    rows = _rows(
        conn,
        "SELECT m.model_id, x.value FROM metrics x JOIN models m ON m.id = x.model_pk "
        "WHERE x.name = 'speedup' AND x.id = (SELECT MAX(y.id) FROM metrics y "
        "WHERE y.model_pk = x.model_pk AND y.name = 'speedup') ORDER BY x.value",
    )
    return [(model_id, float(value)) for model_id, value in rows]


def _rows(conn: Connection, sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    """The rows of one SQL read as plain tuples (the columns are the statement's, so typed Any)."""
    return [tuple(row) for row in conn.execute(text(sql), params or {})]


def success_rate(status_counts: dict[str, int]) -> float | None:
    """completed / (completed + failed + blocked); None before any stage has finished."""
    done = status_counts.get("completed", 0)
    finished = done + status_counts.get("failed", 0) + status_counts.get("blocked", 0)
    return done / finished if finished else None
