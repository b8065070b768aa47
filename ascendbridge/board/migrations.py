"""Forward migrations of the board schema.

Each entry upgrades a board from version N to N+1 and runs inside the opening transaction, so a
board is either fully upgraded or left untouched. `V1_DDL` is the schema as version 1 shipped it;
it is kept so tests can create a genuine old board and watch it upgrade in place.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timezone

from sqlalchemy import Connection, text

from ascendbridge.board.schema import HostAcceptance, HostDevice, Stack

V1_DDL: tuple[str, ...] = (
    "CREATE TABLE schema_info (key VARCHAR NOT NULL PRIMARY KEY, value VARCHAR NOT NULL)",
    """CREATE TABLE models (
        id INTEGER NOT NULL PRIMARY KEY, model_id VARCHAR NOT NULL UNIQUE, source VARCHAR NOT NULL,
        url VARCHAR, path VARCHAR, revision VARCHAR, description VARCHAR NOT NULL,
        adaptation_name VARCHAR NOT NULL UNIQUE, priority INTEGER NOT NULL,
        allow_remote_code BOOLEAN NOT NULL, skip_stages_json VARCHAR NOT NULL,
        architecture VARCHAR, model_type VARCHAR, task_family VARCHAR, parameter_count INTEGER,
        dtype VARCHAR, size_bytes INTEGER, license VARCHAR, gated BOOLEAN,
        metadata_json VARCHAR NOT NULL, created_at VARCHAR NOT NULL)""",
    "CREATE INDEX ix_models_model_id ON models (model_id)",
    """CREATE TABLE tasks (
        id INTEGER NOT NULL PRIMARY KEY,
        model_pk INTEGER NOT NULL REFERENCES models (id) ON DELETE CASCADE,
        stage VARCHAR NOT NULL, stage_order INTEGER NOT NULL, status VARCHAR NOT NULL,
        attempts INTEGER NOT NULL, owner VARCHAR, lease_expires_at VARCHAR,
        fencing_token INTEGER NOT NULL, started_at VARCHAR, finished_at VARCHAR,
        result_json VARCHAR, diagnosis_json VARCHAR, updated_at VARCHAR NOT NULL,
        UNIQUE (model_pk, stage))""",
    "CREATE INDEX ix_tasks_stage_status ON tasks (stage, status)",
    """CREATE TABLE attempts (
        id INTEGER NOT NULL PRIMARY KEY,
        task_id INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
        number INTEGER NOT NULL, fencing_token INTEGER NOT NULL, command VARCHAR NOT NULL,
        exit_code INTEGER, duration_s FLOAT, log_path VARCHAR, agent_backend VARCHAR NOT NULL,
        fix_applied VARCHAR, outcome VARCHAR, diagnosis_json VARCHAR,
        started_at VARCHAR NOT NULL, finished_at VARCHAR)""",
    "CREATE INDEX ix_attempts_task_id ON attempts (task_id)",
    """CREATE TABLE agents (
        id VARCHAR NOT NULL PRIMARY KEY, role VARCHAR NOT NULL, pid INTEGER, host VARCHAR,
        status VARCHAR NOT NULL, current_task_id INTEGER, last_heartbeat VARCHAR NOT NULL,
        started_at VARCHAR NOT NULL)""",
    """CREATE TABLE events (
        id INTEGER NOT NULL PRIMARY KEY,
        model_pk INTEGER REFERENCES models (id) ON DELETE CASCADE, stage VARCHAR,
        kind VARCHAR NOT NULL, message VARCHAR NOT NULL, data_json VARCHAR NOT NULL,
        origin VARCHAR NOT NULL, ts VARCHAR NOT NULL)""",
    "CREATE INDEX ix_events_model_id ON events (model_pk, id)",
    """CREATE TABLE guidance (
        id INTEGER NOT NULL PRIMARY KEY,
        model_pk INTEGER REFERENCES models (id) ON DELETE CASCADE, text VARCHAR NOT NULL,
        origin VARCHAR NOT NULL, state VARCHAR NOT NULL, reply VARCHAR,
        created_at VARCHAR NOT NULL, replied_at VARCHAR)""",
    "INSERT INTO schema_info (key, value) VALUES ('schema_version', '1')",
)


# The metrics table as version 2 created it (frozen: later versions alter it in their own step).
V2_METRICS_DDL: tuple[str, ...] = (
    """CREATE TABLE metrics (
        id INTEGER NOT NULL PRIMARY KEY,
        model_pk INTEGER NOT NULL REFERENCES models (id) ON DELETE CASCADE,
        stage VARCHAR NOT NULL, device VARCHAR NOT NULL, dtype VARCHAR NOT NULL, name VARCHAR NOT NULL,
        value FLOAT NOT NULL, unit VARCHAR NOT NULL, ts VARCHAR NOT NULL)""",
    "CREATE INDEX ix_metrics_model_stage ON metrics (model_pk, stage)",
)


def _v1_to_v2(conn: Connection) -> None:
    """Version 2 adds per-model pause and the metrics table."""
    conn.execute(text("ALTER TABLE models ADD COLUMN paused BOOLEAN NOT NULL DEFAULT 0"))
    for statement in V2_METRICS_DDL:
        conn.execute(text(statement))


def _v2_to_v3(conn: Connection) -> None:
    """Version 3 adds stacks: the stack id per metric, the stacks table, per-model env mode."""
    conn.execute(text("ALTER TABLE models ADD COLUMN env_mode VARCHAR NOT NULL DEFAULT ''"))
    conn.execute(text("ALTER TABLE models ADD COLUMN env_python VARCHAR"))
    conn.execute(text("ALTER TABLE metrics ADD COLUMN stack_id VARCHAR NOT NULL DEFAULT ''"))
    Stack.__table__.create(conn)  # type: ignore[attr-defined]  # SQLModel sets __table__ on table models; its stubs omit it


def _v3_to_v4(conn: Connection) -> None:
    """Version 4 adds devices: where each attempt ran and what it held, and each host's devices."""
    conn.execute(text("ALTER TABLE attempts ADD COLUMN host VARCHAR"))
    conn.execute(text("ALTER TABLE attempts ADD COLUMN devices VARCHAR NOT NULL DEFAULT ''"))
    HostDevice.__table__.create(conn)  # type: ignore[attr-defined]  # SQLModel sets __table__ on table models; its stubs omit it


def _v4_to_v5(conn: Connection) -> None:
    """Version 5 adds gate re-checks: which attempt rows ran only the gate again (attempts.recheck)."""
    conn.execute(text("ALTER TABLE attempts ADD COLUMN recheck INTEGER NOT NULL DEFAULT 0"))


# The pipeline order version 6 introduced (training after healing); frozen here like the DDL above.
V6_STAGE_ORDER = (
    "discovery",
    "adaptation",
    "healing",
    "training",
    "benchmark",
    "optimization",
    "business_benchmark",
    "serving",
)


def _insert_skipped_stage(conn: Connection, stage: str, order: tuple[str, ...]) -> None:
    """A stage added to the pipeline: the tasks' order renumbered to `order` (so rollback's
    `stage_order >=` still means "this stage and later"), and every existing model given the new
    stage's task, skipped by policy (in its skip list), so the pipeline advances over it."""
    for index, name in enumerate(order):
        conn.execute(
            text("UPDATE tasks SET stage_order = :order WHERE stage = :stage"), {"order": index, "stage": name}
        )
    now = datetime.now(timezone.utc).isoformat(timespec="microseconds")
    for pk, skips in conn.execute(text("SELECT id, skip_stages_json FROM models")).all():
        conn.execute(
            text("UPDATE models SET skip_stages_json = :skips WHERE id = :pk"),
            {"skips": json.dumps(sorted(set(json.loads(str(skips or "[]"))) | {stage})), "pk": pk},
        )
        conn.execute(
            text(
                "INSERT INTO tasks (model_pk, stage, stage_order, status, attempts, fencing_token, "
                "finished_at, updated_at) SELECT :pk, :stage, :order, 'skipped', 0, 0, :now, :now "
                "WHERE NOT EXISTS (SELECT 1 FROM tasks WHERE model_pk = :pk AND stage = :stage)"
            ),
            {"pk": pk, "stage": stage, "order": order.index(stage), "now": now},
        )


def _v5_to_v6(conn: Connection) -> None:
    """Version 6 adds training jobs (models.training_json) and the training stage after healing
    (no existing model has a job)."""
    conn.execute(text("ALTER TABLE models ADD COLUMN training_json VARCHAR NOT NULL DEFAULT '{}'"))
    _insert_skipped_stage(conn, "training", V6_STAGE_ORDER)


# The pipeline order version 7 introduced (quantization after business_benchmark); frozen like V6_STAGE_ORDER.
V7_STAGE_ORDER = (*V6_STAGE_ORDER[:-1], "quantization", V6_STAGE_ORDER[-1])


def _v6_to_v7(conn: Connection) -> None:
    """Version 7 adds the quantization stage, optional (opt-in per model)."""
    _insert_skipped_stage(conn, "quantization", V7_STAGE_ORDER)


def _v7_to_v8_host_acceptance(conn: Connection) -> None:
    """Version 8 adds host acceptance: each host's measured figures per stack (the training preflight's cache)."""
    HostAcceptance.__table__.create(conn)  # type: ignore[attr-defined]  # SQLModel sets __table__ on table models; its stubs omit it


def _v8_to_v9(conn: Connection) -> None:
    """Version 9 adds each attempt's cost: where its time went (attempts.cost_profile_json, phase ->
    seconds) and its peak resident memory (attempts.peak_rss_bytes); NULL for older attempts."""
    conn.execute(text("ALTER TABLE attempts ADD COLUMN cost_profile_json VARCHAR"))
    conn.execute(text("ALTER TABLE attempts ADD COLUMN peak_rss_bytes INTEGER"))


def _v9_to_v10(conn: Connection) -> None:
    """Version 10 adds reduced-depth proxies: the layers every stage builds (models.proxy_depth; NULL:
    the full depth, as every older model)."""
    conn.execute(text("ALTER TABLE models ADD COLUMN proxy_depth INTEGER"))


MIGRATIONS: dict[int, Callable[[Connection], None]] = {
    1: _v1_to_v2,
    2: _v2_to_v3,
    3: _v3_to_v4,
    4: _v4_to_v5,
    5: _v5_to_v6,
    6: _v6_to_v7,
    7: _v7_to_v8_host_acceptance,
    8: _v8_to_v9,
    9: _v9_to_v10,
}
