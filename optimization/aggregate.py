"""Collect optimization notes across adaptations: one row per model, reports and a figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ab_runtime.optimize.notes_file import NOTES_FILE, read_notes
from ascendbridge.gatekit.summary import collect_rows, pyplot, save_figure, write_summary

COLUMNS = (
    "adaptation",
    "model_id",
    "device",
    "outcome",
    "chosen",
    "speedup",
    "selection_speedup",
    "interval_low",
    "interval_high",
    "baseline_median_ms",
    "optimized_median_ms",
    "accuracy",
    "passes_tried",
    "passes_measured",
    "first_call_ms",
    "runtime_only",
)


def row(notes: dict[str, Any]) -> dict[str, Any]:
    final = notes["final"]
    interval = final.get("interval") or [None, None]
    measured = [r for r in notes["passes"] if r.get("measured")]
    return {
        "adaptation": notes["adaptation"],
        "model_id": notes["model_id"],
        "device": notes["device"],
        "outcome": final["outcome"],
        "chosen": "+".join(notes["chosen"]),
        "speedup": final["speedup"],
        "selection_speedup": final.get("selection_speedup"),
        "interval_low": interval[0],
        "interval_high": interval[1],
        "baseline_median_ms": final.get("baseline_median_ms"),
        "optimized_median_ms": final.get("optimized_median_ms"),
        "accuracy": ((notes.get("perf_run") or {}).get("accuracy") or {}).get("verdict"),
        "passes_tried": len(notes["passes"]),
        "passes_measured": len(measured),
        "first_call_ms": (final.get("cold_start") or {}).get("first_call_ms"),
        "runtime_only": notes["runtime_only"],
    }


def collect(root: Path) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Rows for every readable notes file under root/*/; the rest listed as skipped with a reason."""
    return collect_rows(root, f"*/{NOTES_FILE}", _rows, (OSError, ValueError, KeyError, TypeError, AttributeError))


def _rows(path: Path) -> list[dict[str, Any]]:
    return [row(read_notes(path))]


def write_reports(rows: list[dict[str, Any]], skipped: list[dict[str, str]], out_dir: Path) -> list[Path]:
    return write_summary(rows, skipped, out_dir, "optimization_summary", "models", COLUMNS)


def write_figure(rows: list[dict[str, Any]], out_dir: Path) -> list[Path]:
    """Speedup per model (bar) with its interval (whisker); 1.0 = no gain."""
    if not rows:
        return []
    plt = pyplot()
    out_dir.mkdir(parents=True, exist_ok=True)
    labels = [f"{r['adaptation']}\n{r['chosen'] or 'no gain'}" for r in rows]
    speed = [r["speedup"] for r in rows]
    low = [max(s - (r["interval_low"] if r["interval_low"] is not None else s), 0.0) for s, r in zip(speed, rows)]
    high = [max((r["interval_high"] if r["interval_high"] is not None else s) - s, 0.0) for s, r in zip(speed, rows)]
    fig, ax = plt.subplots(figsize=(9, max(3.0, 0.5 * len(rows) + 1.5)))
    ax.barh(labels, speed, xerr=[low, high], color=["#55a868" if r["outcome"] == "gain" else "#8c8c8c" for r in rows])
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("speedup over the eager baseline (paired median ratio; whisker: sign-test interval)")
    ax.set_title("AscendBridge optimization")
    return [save_figure(fig, out_dir / "optimization_speedup.png")]


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two notes documents side by side: final figures and every pass's effect."""

    def effects(notes: dict[str, Any]) -> dict[str, Any]:
        return {
            r["name"]: {
                "speedup": (r.get("paired") or {}).get("speedup"),
                "kept": r["kept"],
                "accuracy": (r.get("accuracy") or {}).get("verdict"),
                "reason": r["reason"],
            }
            for r in notes["passes"]
        }

    ea, eb = effects(a), effects(b)
    return {
        "a": row(a),
        "b": row(b),
        "passes": {name: {"a": ea.get(name), "b": eb.get(name)} for name in sorted(set(ea) | set(eb))},
    }
