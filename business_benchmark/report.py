"""Business evidence side by side (compare) and across models (aggregate: JSON, CSV, a figure).

Reads business_metrics_*.json only; files may come from other machines (an Ascend host, a CUDA
host): nothing here needs the adaptation or torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ascendbridge.gatekit.summary import collect_rows, pyplot, save_figure, write_summary
from business_benchmark.datasets import DatasetError
from business_benchmark.evidence import METRICS_PREFIX, read_json

COLUMNS = (
    "adaptation",
    "model_id",
    "task_family",
    "device",
    "device_name",
    "dtype",
    "weights",
    "set",
    "task",
    "metric",
    "kind",
    "target",
    "reference",
    "verdict",
    "target_items_per_s",
    "target_tokens_per_s",
)


def flat_rows(evidence: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (evaluation, metric): task scores with both sides, agreement values alone."""
    run = evidence.get("run") or {}
    base = {
        "adaptation": evidence.get("adaptation"),
        "model_id": evidence.get("model_id"),
        "task_family": evidence.get("task_family"),
        "device": run.get("device"),
        "device_name": run.get("device_name"),
        "dtype": run.get("dtype"),
        "weights": evidence.get("weights"),
    }
    rows = []
    for ev in evidence.get("evaluations", []):
        common = {
            **base,
            "set": ev["set"],
            "task": ev["task"],
            "verdict": ev["verdict"],
            "target_items_per_s": ev["timing"].get("target_items_per_s"),
            "target_tokens_per_s": ev["timing"].get("target_tokens_per_s"),
        }
        for name, pair in sorted(ev["metrics"]["task"].items()):
            rows.append(
                {
                    **common,
                    "metric": name,
                    "kind": "task",
                    "target": pair.get("target"),
                    "reference": pair.get("reference"),
                }
            )
        for name, value in sorted(ev["metrics"]["agreement"].items()):
            rows.append({**common, "metric": name, "kind": "agreement", "target": value, "reference": None})
    return rows


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two evidence files of the same model, metric by metric: A's and B's target values."""
    rows_a = {(r["set"], r["metric"]): r for r in flat_rows(a)}
    rows_b = {(r["set"], r["metric"]): r for r in flat_rows(b)}
    out = []
    for key in sorted(set(rows_a) | set(rows_b)):
        ra, rb = rows_a.get(key), rows_b.get(key)
        out.append(
            {
                "set": key[0],
                "metric": key[1],
                "kind": (ra or rows_b[key])["kind"],
                "a": ra["target"] if ra else None,
                "b": rb["target"] if rb else None,
                "a_items_per_s": ra["target_items_per_s"] if ra else None,
                "b_items_per_s": rb["target_items_per_s"] if rb else None,
                "a_tokens_per_s": ra["target_tokens_per_s"] if ra else None,
                "b_tokens_per_s": rb["target_tokens_per_s"] if rb else None,
            }
        )

    def side(e: dict[str, Any]) -> dict[str, Any]:
        return {
            "device": (e.get("run") or {}).get("device"),
            "device_name": (e.get("run") or {}).get("device_name"),
            "dtype": (e.get("run") or {}).get("dtype"),
            "weights": e.get("weights"),
            "verdict": e.get("verdict"),
        }

    notes = (
        []
        if a.get("model_id") == b.get("model_id")
        else [f"different models: {a.get('model_id')} vs {b.get('model_id')}"]
    )
    return {"a": side(a), "b": side(b), "rows": out, "notes": notes}


def collect(adaptations_root: Path) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    return collect_rows(
        adaptations_root,
        f"*/{METRICS_PREFIX}*.json",
        lambda path: flat_rows(read_json(path)),
        (DatasetError, KeyError, TypeError, AttributeError),
    )


def write_reports(rows: list[dict[str, Any]], skipped: list[dict[str, str]], out_dir: Path) -> list[Path]:
    return write_summary(rows, skipped, out_dir, "business_summary", "rows", COLUMNS)


def write_figure(rows: list[dict[str, Any]], out_dir: Path) -> list[Path]:
    """Task scores: target vs reference per (model, set, metric); agreement-only models are absent."""
    plt = pyplot()

    task = [r for r in rows if r["kind"] == "task" and r["target"] is not None and r["reference"] is not None]
    if not task:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    labels = [f"{r['adaptation']} {r['set']}\n{r['metric']} ({r['device']} {r['dtype']})" for r in task]
    fig, ax = plt.subplots(figsize=(9, max(3.0, 0.5 * len(task) + 1.5)))
    y = list(range(len(task)))
    ax.barh(
        [i + 0.2 for i in y], [r["reference"] for r in task], height=0.4, color="#8c8c8c", label="reference (CPU fp32)"
    )
    ax.barh(
        [i - 0.2 for i in y],
        [r["target"] for r in task],
        height=0.4,
        color=["#55a868" if r["verdict"] == "pass" else "#c44e52" for r in task],
        label="target",
    )
    ax.set_yticks(y, labels)
    ax.set_title("AscendBridge business benchmark: task scores, target vs reference")
    ax.legend(loc="lower right")
    return [save_figure(fig, out_dir / "business_scores.png")]
