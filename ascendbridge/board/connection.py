"""Opening a board file: validation, engines, pragmas, schema creation and migration.

Two engines share one file: writes go through an engine whose transactions start with
`BEGIN IMMEDIATE` (the write lock is taken up front, so two writers never deadlock on a lock
upgrade); reads use plain deferred transactions and never block behind a writer under WAL.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path

from sqlalchemy import Engine, create_engine, event, text
from sqlmodel import SQLModel

from ascendbridge.board.migrations import MIGRATIONS
from ascendbridge.board.schema import SCHEMA_VERSION
from ascendbridge.settings import GeneralSettings, section



def busy_timeout_ms() -> int:
    """SQLite's busy timeout: 30 s unless the settings say otherwise (tests shorten it to
    provoke a busy board without waiting half a minute)."""
    try:
        return max(1, int(section(GeneralSettings).board_busy_timeout_s * 1000))
    except ValueError as exc:
        raise BoardError(str(exc)) from None


class BoardError(Exception):
    """Any board problem a user must see as one clear line."""


class BoardMissingError(BoardError):
    pass


class BoardBusyError(BoardError):
    """The board stayed locked by another writer for longer than the busy timeout: try again."""


def _dir_writable(directory: Path) -> bool:
    """Try it instead of asking os.access, which says yes to root even on read-only mounts."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            return True
    except OSError:
        return False


def _file_writable(path: Path) -> bool:
    """Ask, never open: closing any descriptor of the database file drops every POSIX lock this
    process holds on it (SQLite's own included), after which another process may take itself for
    the last connection and delete the WAL under everyone else. A read-only file that root can
    still 'access' is caught by SQLite itself on the first write, which open_engines reports."""
    return os.access(path, os.W_OK)


def _check_file(path: Path, create: bool) -> None:
    if path.is_dir():
        raise BoardError(f"board path {path} is a directory, not a database file")
    if not path.exists():
        if not create:
            raise BoardMissingError(
                f"no board at {path}; create it with: scripts/board_ops.py init"
            )
        parent = path.parent if str(path.parent) else Path(".")
        if not parent.is_dir():
            raise BoardError(f"cannot create board: directory {parent} does not exist")
        if not _dir_writable(parent):
            raise BoardError(f"cannot create board: directory {parent} is not writable")
        return
    # The file header is checked by SQLite itself on connect (see _wrap_open_error): reading it
    # here would open and close the database file, which drops this process's SQLite locks.
    if not _file_writable(path) or not _dir_writable(path.parent):
        raise BoardError(f"board {path} (or its directory) is not writable")


def _make_engine(path: Path, immediate: bool) -> Engine:
    timeout_ms = busy_timeout_ms()
    engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": timeout_ms / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _record: object) -> None:
        dbapi_conn.isolation_level = None  # let SQLAlchemy issue BEGIN itself
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {timeout_ms}")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.execute("PRAGMA synchronous = NORMAL")
        if immediate:  # must run outside a transaction; persistent once set
            mode = cur.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise BoardError(f"board {path}: could not enable WAL journal (got {mode})")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:  # type: ignore[no-untyped-def]
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def _read_version(conn) -> int | None:  # type: ignore[no-untyped-def]
    has_table = conn.execute(
        text("SELECT name FROM sqlite_master WHERE type='table' AND name='schema_info'")
    ).first()
    if not has_table:
        return None
    row = conn.execute(text("SELECT value FROM schema_info WHERE key='schema_version'")).first()
    return int(row[0]) if row else None


def open_engines(path: Path, create: bool = False) -> tuple[Engine, Engine]:
    """Validate the file, create or upgrade the schema, return (write_engine, read_engine)."""
    path = Path(path)
    _check_file(path, create)
    write_engine = _make_engine(path, immediate=True)
    try:
        with write_engine.begin() as conn:
            version = _read_version(conn)
            if version is None:
                tables = conn.execute(text("SELECT count(*) FROM sqlite_master")).scalar()
                if tables:
                    raise BoardError(f"{path} is a SQLite database but not an AscendBridge board")
                if not create:
                    raise BoardMissingError(
                        f"board {path} is empty; create it with: scripts/board_ops.py init"
                    )
                SQLModel.metadata.create_all(conn)
                conn.execute(
                    text("INSERT INTO schema_info (key, value) VALUES ('schema_version', :v)"),
                    {"v": str(SCHEMA_VERSION)},
                )
            elif version > SCHEMA_VERSION:
                raise BoardError(
                    f"board {path} has schema version {version}, newer than this AscendBridge "
                    f"understands ({SCHEMA_VERSION}); upgrade AscendBridge"
                )
            else:
                while version < SCHEMA_VERSION:
                    MIGRATIONS[version](conn)
                    version += 1
                conn.execute(
                    text("UPDATE schema_info SET value = :v WHERE key = 'schema_version'"),
                    {"v": str(version)},
                )
    except BoardError:
        write_engine.dispose()
        raise
    except Exception as exc:
        write_engine.dispose()
        cause = getattr(exc, "orig", exc)
        if "file is not a database" in str(cause):
            raise BoardError(f"{path} is not a SQLite database (wrong file header)") from exc
        raise BoardError(f"board {path}: {cause}") from exc
    return write_engine, _make_engine(path, immediate=False)
