"""Every stage tool's aggregate report: the evidence files collected into rows, the report written
(JSON + CSV) and its figures saved, the same way for the benchmark, optimization and business."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def write_summary(
    rows: list[dict[str, Any]],
    skipped: list[dict[str, str]],
    out_dir: Path,
    stem: str,
    rows_key: str,
    columns: Sequence[str],
) -> list[Path]:
    """`<stem>.json` ({rows_key: rows, "skipped": [...]}) and `<stem>.csv` (one row each): the one
    writer of every tool's aggregate report (benchmark, optimization, business)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = out_dir / f"{stem}.json", out_dir / f"{stem}.csv"
    json_path.write_text(json.dumps({rows_key: rows, "skipped": skipped}, indent=2, sort_keys=True) + "\n")
    with open(csv_path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns))
        writer.writeheader()
        writer.writerows(rows)
    return [json_path, csv_path]


def collect_rows(
    root: Path, pattern: str, rows_of: Callable[[Path], list[dict[str, Any]]], errors: tuple[type[Exception], ...]
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """(rows, skipped): `rows_of(file)` for every file under `root` matching `pattern`; a file that
    raises one of `errors` is skipped with its reason."""
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    for path in sorted(Path(root).glob(pattern)):
        try:
            rows += rows_of(path)
        except errors as exc:
            skipped.append({"file": str(path), "reason": f"{type(exc).__name__}: {exc}"})
    return rows, skipped


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend (imported only when a figure is drawn)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path) -> Path:
    """Lay out, write as PNG and close one figure."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path
