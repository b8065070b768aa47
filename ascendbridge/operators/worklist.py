"""The board-wide custom-operator worklist: the ops that block the most models, per release.

Read from every adaptation's `op_gaps.json` (written by the benchmark stage, recomputed by its
gate): each gap counts once per model; ops whose remedy is `custom_op` rank first (an operator
author's queue), then by how many models lack them, then by their summed CPU share.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPORT_FILE = "op_gaps.json"  # benchmark/op_coverage.py REPORT (the stage writes it under this name)


def model_report(adaptation_dir: Path | None) -> dict[str, Any] | None:
    """One adaptation's op_gaps.json; None when absent or unreadable."""
    path = Path(adaptation_dir) / REPORT_FILE if adaptation_dir is not None else None
    if path is None or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("reports"), dict) else None


def model_reports(adaptations_root: Path) -> dict[str, dict[str, Any]]:
    """Adaptation name -> its op_gaps.json (unreadable ones are left out)."""
    found = {}
    for path in sorted(Path(adaptations_root).glob(f"*/{REPORT_FILE}")):
        data = model_report(path.parent)
        if data is not None:
            found[path.parent.name] = data
    return found


def worklist(reports: dict[str, dict[str, Any]], release: str) -> list[dict[str, Any]]:
    """One row per missing op of `release`: the models it blocks, its remedy classes, its spec."""
    rows: dict[str, dict[str, Any]] = {}
    for name, data in reports.items():
        report = (data.get("reports") or {}).get(release) or {}
        for gap in report.get("gaps") or []:
            row = rows.setdefault(
                gap["op"],
                {"op": gap["op"], "models": [], "remedies": set(), "cpu_share": 0.0, "modules": [], "spec": None},
            )
            row["models"].append(name)
            row["remedies"].add(gap["remedy"]["class"])
            row["cpu_share"] += float(gap.get("cpu_share") or 0.0)
            row["modules"].append(f"{name}: {gap.get('module')}")
            row["spec"] = row["spec"] or gap["remedy"].get("spec")
    ranked = sorted(
        rows.values(), key=lambda r: ("custom_op" not in r["remedies"], -len(r["models"]), -r["cpu_share"], r["op"])
    )
    return [{**r, "remedies": sorted(r["remedies"]), "blocking": "custom_op" in r["remedies"]} for r in ranked]


def releases_seen(reports: dict[str, dict[str, Any]]) -> list[str]:
    return sorted({release for data in reports.values() for release in data.get("reports") or {}})
