"""Opening a board file: validation, engines, pragmas, schema creation and migration.

Two engines share one file: writes go through an engine whose transactions start with
`BEGIN IMMEDIATE` (the write lock is taken up front, so two writers never deadlock on a lock
upgrade); reads use plain deferred transactions and never block behind a writer under WAL.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlmodel import SQLModel

from ascendbridge.board.migrations import MIGRATIONS
from ascendbridge.board.schema import SCHEMA_VERSION
from ascendbridge.settings import GeneralSettings, SettingsError, section

RECOVER_HINT = (
    "restore a backup copy of the board, or salvage it: "
    'sqlite3 BOARD .recover | sqlite3 NEW.db (docs/board.md, "A corrupt board")'
)


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


class BoardCorruptError(BoardError):
    """The board file is malformed (SQLite's integrity check or a statement says so): nothing is
    written into it; the message says how to recover."""


class BoardFullError(BoardError):
    """The disk holding the board (or its journal) is full: the write was rolled back."""


class BoardReadOnlyError(BoardError):
    """A write on a board opened read-only (the file or its directory is not writable)."""


def check_budget_s() -> float:
    """How long the integrity check may run (general.board_check_s; 0: skip)."""
    try:
        return section(GeneralSettings).board_check_s
    except SettingsError as exc:
        raise BoardError(str(exc)) from None


def _quick_check(conn: sqlite3.Connection, path: Path) -> None:
    """`PRAGMA quick_check`, stopped after the budget (a huge board is then opened unchecked rather
    than late). Raises BoardCorruptError naming the first problem found."""
    budget = check_budget_s()
    if budget <= 0:
        return
    deadline = time.monotonic() + budget
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        rows = conn.execute("PRAGMA quick_check(1)").fetchall()
    except sqlite3.DatabaseError as exc:
        if "interrupted" in str(exc):
            return
        raise BoardCorruptError(f"board {path} is corrupt ({exc}); {RECOVER_HINT}") from exc
    finally:
        conn.set_progress_handler(None, 0)
    if rows and rows[0][0] != "ok":
        first = " ".join(str(rows[0][0]).replace("*** in database main ***", "").split())
        raise BoardCorruptError(f"board {path} is corrupt ({first}); {RECOVER_HINT}")


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


def writable(path: Path) -> bool:
    """Whether this process can write the board file and its directory (WAL and journal files)."""
    return _file_writable(path) and _dir_writable(path.parent)


def _check_file(path: Path, create: bool) -> None:
    if path.is_dir():
        raise BoardError(f"board path {path} is a directory, not a database file")
    if not path.exists():
        if not create:
            raise BoardMissingError(f"no board at {path}; create it with: scripts/board_ops.py init")
        parent = path.parent if str(path.parent) else Path(".")
        if not parent.is_dir():
            raise BoardError(f"cannot create board: directory {parent} does not exist")
        if not _dir_writable(parent):
            raise BoardError(f"cannot create board: directory {parent} is not writable")
        return
    # The file header is checked by SQLite itself on connect (see _wrap_open_error): reading it
    # here would open and close the database file, which drops this process's SQLite locks.
    if not writable(path):
        raise BoardReadOnlyError(
            f"board {path} (or its directory) is not writable; reading commands (list_models, show, export) still work"
        )


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
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def _read_version(conn: Connection) -> int | None:
    has_table = conn.execute(text("SELECT name FROM sqlite_master WHERE type='table' AND name='schema_info'")).first()
    if not has_table:
        return None
    row = conn.execute(text("SELECT value FROM schema_info WHERE key='schema_version'")).first()
    return int(row[0]) if row else None


def open_engines(path: Path, create: bool = False) -> tuple[Engine, Engine]:
    """Validate the file, check its integrity (bounded in time), create or upgrade the schema,
    return (write_engine, read_engine)."""
    path = Path(path)
    _check_file(path, create)
    write_engine = _make_engine(path, immediate=True)
    try:
        with write_engine.connect() as conn:
            # SQLAlchemy types the raw connection as its DBAPI protocol; on this engine it is sqlite3's
            _quick_check(conn.connection.dbapi_connection, path)  # type: ignore[arg-type]
        with write_engine.begin() as conn:
            version = _read_version(conn)
            if version is None:
                tables = conn.execute(text("SELECT count(*) FROM sqlite_master")).scalar()
                if tables:
                    raise BoardError(f"{path} is a SQLite database but not an AscendBridge board")
                if not create:
                    raise BoardMissingError(f"board {path} is empty; create it with: scripts/board_ops.py init")
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
                    text("UPDATE schema_info SET value = :v WHERE key = 'schema_version'"), {"v": str(version)}
                )
    except BoardError:
        write_engine.dispose()
        raise
    except Exception as exc:
        raise open_error(write_engine, path, exc) from exc
    return write_engine, _make_engine(path, immediate=False)


def open_error(engine: Engine, path: Path, exc: Exception) -> BoardError:
    """Why the board at `path` could not be opened, its engine disposed (a file that is no SQLite
    database says so)."""
    engine.dispose()
    cause = getattr(exc, "orig", exc)
    if "file is not a database" in str(cause):
        return BoardError(f"{path} is not a SQLite database (wrong file header)")
    return board_error(path, cause)


def board_error(path: Path, cause: BaseException) -> BoardError:
    """The BoardError for an SQLite failure: corrupt and full are their own kinds (the team lead
    exits 3 on both, and says what to do)."""
    text = str(cause)
    if "malformed" in text or isinstance(cause, sqlite3.DatabaseError) and "corrupt" in text:
        return BoardCorruptError(f"board {path} is corrupt ({text}); {RECOVER_HINT}")
    if "disk is full" in text or "disk I/O error" in text and _free_bytes(path.parent) == 0:
        return BoardFullError(
            f"board {path}: the disk is full ({text}); free space on "
            f"{path.parent} and start again (nothing half-written was kept)"
        )
    return BoardError(f"board {path}: {text}")


def _free_bytes(directory: Path) -> int:
    try:
        st = os.statvfs(directory)
    except OSError:
        return -1
    return st.f_bavail * st.f_frsize


def read_only_engine(path: Path) -> Engine:
    """An engine that can only read, on a board that may sit on a read-only file system or be a
    file this user cannot write: `mode=ro`, and when SQLite cannot open the WAL index there
    (read-only directory, no `-shm` file), `immutable=1` (nothing can change it through this
    mount anyway). `PRAGMA query_only` on every connection."""
    path = Path(path)
    if path.is_dir():
        raise BoardError(f"board path {path} is a directory, not a database file")
    if not path.is_file():
        raise BoardMissingError(f"no board at {path}; create it with: scripts/board_ops.py init")
    timeout_ms = busy_timeout_ms()
    base = f"file:{quote(str(path.absolute()))}?mode=ro"

    def connect() -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(base, uri=True, timeout=timeout_ms / 1000, check_same_thread=False)
            conn.execute("PRAGMA schema_version").fetchone()
        except sqlite3.OperationalError as exc:
            if "unable to open" not in str(exc) or _dir_writable(path.parent):
                raise
            conn = sqlite3.connect(base + "&immutable=1", uri=True, timeout=timeout_ms / 1000, check_same_thread=False)
        return conn

    engine = create_engine("sqlite://", creator=connect)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _record: object) -> None:
        dbapi_conn.isolation_level = None  # SQLAlchemy's begin event issues BEGIN itself
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {timeout_ms}")
        cur.execute("PRAGMA query_only = ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN")

    return engine


def open_read_only(path: Path) -> Engine:
    """A read-only engine on an existing board of this schema version (an older one must be
    upgraded by a writer first: `board_ops.py init`)."""
    engine = read_only_engine(path)
    try:
        with engine.connect() as conn:
            version = _read_version(conn)
    except Exception as exc:
        raise open_error(engine, path, exc) from exc
    if version != SCHEMA_VERSION:
        engine.dispose()
        if version is None:
            raise BoardError(f"{path} is not an AscendBridge board (or an empty one)")
        if version > SCHEMA_VERSION:
            raise BoardError(
                f"board {path} has schema version {version}, newer than this AscendBridge "
                f"understands ({SCHEMA_VERSION}); upgrade AscendBridge"
            )
        raise BoardError(
            f"board {path} has schema version {version}; upgrade it with write access first (scripts/board_ops.py init)"
        )
    return engine
