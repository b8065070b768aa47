"""The one writer of every stage tool's aggregate report (JSON + CSV)."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def write_summary(rows: list[dict[str, Any]], skipped: list[dict[str, str]], out_dir: Path, stem: str,
                  rows_key: str, columns: Sequence[str]) -> list[Path]:
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
