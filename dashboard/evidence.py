"""Stage evidence read from disk: benchmark metrics, optimization notes, traces, logs, zips.

The stage packages own the evidence formats and they evolve, so this reader is tolerant: it
shows the numbers it recognises (latency figures, per-output accuracy rows, tables of tried
passes) and says "no evidence yet" for what does not exist. Every path it opens is resolved and
checked to lie inside its root (the adaptations or the logs directory): a board row pointing at
/etc/passwd, or a symlink planted in an adaptation, shows nothing.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Optional

MAX_JSON_BYTES = 4 * 1024 * 1024
LOG_TAIL_BYTES = 8 * 1024
MAX_ZIP_INPUT_BYTES = 2 * 1024**3
ZIP_SKIP_DIRS = frozenset({".venv", "__pycache__", ".pytest_cache", ".git", ".mypy_cache"})
TRACE_NAME = re.compile(r"^trace_[A-Za-z0-9._-]+\.json$")
_METRICS_NAME = re.compile(r"^benchmark_metrics_(?P<label>[A-Za-z0-9._-]+)\.json$")

Scalar = str | int | float | bool | None


class EvidenceError(Exception):
    """A requested evidence file that does not exist or may not be served."""


def inside(path: Path, root: Path) -> Optional[Path]:
    """The resolved path if it lies inside root (symlinks followed), else None."""
    try:
        resolved = path.resolve()
        return resolved if resolved.is_relative_to(root.resolve()) else None
    except (OSError, RuntimeError):
        return None


def adaptation_dir(adaptations_root: Path, adaptation_name: str) -> Optional[Path]:
    found = inside(adaptations_root / adaptation_name, adaptations_root)
    return found if found is not None and found.is_dir() else None


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def flatten(data: dict[str, Any], prefix: str = "", depth: int = 1) -> dict[str, Scalar]:
    """Scalars of a dict, nested dicts folded into dotted keys up to `depth` levels."""
    out: dict[str, Scalar] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if _scalar(value):
            out[name] = value
        elif isinstance(value, dict) and depth > 0:
            out.update(flatten(value, f"{name}.", depth - 1))
        elif isinstance(value, list) and all(_scalar(v) for v in value):
            out[name] = ", ".join(str(v) for v in value)
    return out


@dataclass
class Table:
    """Rows of scalars with the union of their columns, in first-seen order."""

    title: str
    columns: list[str]
    rows: list[dict[str, Scalar]]


def table_of(title: str, value: Any, name_keys: tuple[str, ...] = ("name", "output", "pass")) -> Optional[Table]:
    """A dict of dicts or a list of dicts as a table; anything else is not a table."""
    items: list[tuple[str, dict[str, Any]]] = []
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for i, v in enumerate(value):
            label = next((str(v[k]) for k in name_keys if k in v and _scalar(v[k])), str(i))
            items.append((label, v))
    if not items:
        return None
    rows: list[dict[str, Scalar]] = []
    columns: list[str] = []
    for label, item in items:
        row: dict[str, Scalar] = {"name": label}
        row.update({k: v for k, v in flatten(item).items() if k not in name_keys})
        for key in row:
            if key not in columns:
                columns.append(key)
        rows.append(row)
    return Table(title=title, columns=columns, rows=rows)


def _load_json(path: Path) -> Optional[dict[str, Any]]:
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass
class BenchmarkRun:
    """One benchmark_metrics_<device>_<dtype>_<mode>_<dataset>.json file."""

    file: str
    label: str
    latency: dict[str, float]
    accuracy: Optional[Table]
    figures: dict[str, Scalar]
    readable: bool = True


def _latency(data: dict[str, Any]) -> dict[str, float]:
    block = data.get("latency") or data.get("latency_ms")
    source = block if isinstance(block, dict) else {k: v for k, v in data.items() if k.startswith("latency")}
    return {
        k: float(v) for k, v in source.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def benchmark_runs(adapt_dir: Optional[Path]) -> list[BenchmarkRun]:
    if adapt_dir is None:
        return []
    runs = []
    for path in sorted(adapt_dir.glob("benchmark_metrics_*.json")):
        match = _METRICS_NAME.match(path.name)
        if not match or inside(path, adapt_dir) is None:
            continue
        data = _load_json(path)
        if data is None:
            runs.append(BenchmarkRun(path.name, match["label"], {}, None, {}, readable=False))
            continue
        accuracy = data.get("accuracy")
        if isinstance(accuracy, dict) and isinstance(accuracy.get("outputs"), (dict, list)):
            accuracy = accuracy["outputs"]
        rest = {k: v for k, v in data.items() if k not in ("accuracy", "latency", "latency_ms")}
        runs.append(
            BenchmarkRun(
                file=path.name,
                label=match["label"],
                latency=_latency(data),
                accuracy=table_of("accuracy vs reference", accuracy),
                figures=flatten(rest),
            )
        )
    return runs


@dataclass
class OptimizationNotes:
    summary: dict[str, Scalar]
    tables: list[Table] = field(default_factory=list)
    readable: bool = True

    def speedups(self) -> list[tuple[str, float]]:
        """(row name, speedup) pairs from the notes' tables, for the speedup chart."""
        out = []
        for table in self.tables:
            key = next((c for c in table.columns if "speedup" in c.lower()), None)
            if key is None:
                continue
            for row in table.rows:
                value = row.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    out.append((f"{row['name']}", float(value)))
        return out


def optimization_notes(adapt_dir: Optional[Path]) -> Optional[OptimizationNotes]:
    if adapt_dir is None:
        return None
    path = adapt_dir / "optimization_notes.json"
    if not path.is_file() or inside(path, adapt_dir) is None:
        return None
    data = _load_json(path)
    if data is None:
        return OptimizationNotes(summary={}, readable=False)
    tables = [t for key, value in data.items() if (t := table_of(key, value)) is not None]
    table_keys = {t.title for t in tables}
    summary = flatten({k: v for k, v in data.items() if k not in table_keys})
    return OptimizationNotes(summary=summary, tables=tables)


def traces(adapt_dir: Optional[Path]) -> list[tuple[str, int]]:
    """(file name, size) of the Chrome traces an adaptation holds."""
    if adapt_dir is None:
        return []
    out = []
    for path in sorted(adapt_dir.glob("trace_*.json")):
        if TRACE_NAME.match(path.name) and inside(path, adapt_dir) is not None and path.is_file():
            out.append((path.name, path.stat().st_size))
    return out


def trace_file(adapt_dir: Optional[Path], name: str) -> Path:
    if adapt_dir is None:
        raise EvidenceError("this model has no adaptation directory yet")
    if not TRACE_NAME.match(name):
        raise EvidenceError(f"'{name}' is not a trace file name (trace_<...>.json)")
    found = inside(adapt_dir / name, adapt_dir)
    if found is None or not found.is_file():
        raise EvidenceError(f"no trace '{name}' in this adaptation")
    return found


@dataclass(frozen=True)
class LogTail:
    text: Optional[str]
    note: str = ""
    truncated: bool = False


def log_tail(log_path: Optional[str], logs_root: Path, max_bytes: int = LOG_TAIL_BYTES) -> LogTail:
    """The end of an attempt's log, only if the file lies inside the logs directory."""
    if not log_path:
        return LogTail(None, "no log recorded")
    path = Path(log_path)
    if not path.is_absolute():
        path = logs_root / path
    found = inside(path, logs_root)
    if found is None:
        return LogTail(None, "log is outside the logs directory; not shown")
    if not found.is_file():
        return LogTail(None, "log file no longer exists")
    try:
        with found.open("rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - max_bytes))
            raw = fh.read(max_bytes)
    except OSError as exc:
        return LogTail(None, f"log unreadable: {exc.strerror}")
    return LogTail(raw.decode("utf-8", errors="replace"), truncated=size > max_bytes)


def zip_adaptation(adapt_dir: Path) -> IO[bytes]:
    """The adaptation as a zip in a temporary file: environments, caches and symlinks left out."""
    total = 0
    spool = tempfile.SpooledTemporaryFile(max_size=32 * 1024 * 1024)
    with zipfile.ZipFile(spool, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for root, dirs, files in os.walk(adapt_dir, followlinks=False):
            dirs[:] = sorted(d for d in dirs if d not in ZIP_SKIP_DIRS and not Path(root, d).is_symlink())
            for name in sorted(files):
                path = Path(root, name)
                if path.is_symlink() or not path.is_file():
                    continue
                total += path.stat().st_size
                if total > MAX_ZIP_INPUT_BYTES:
                    raise EvidenceError("adaptation is larger than 2 GiB; copy it from disk instead")
                archive.write(path, Path(adapt_dir.name, path.relative_to(adapt_dir)).as_posix())
    spool.seek(0)
    return spool
