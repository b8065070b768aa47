"""A host's measured figures side by side with their expectations, as ratios, and the verdict.

Each figure's expectation is its device's datasheet figure (expectations.toml) where the row gives
one, else the same figure of this host's first acceptance (its baseline: the board's earliest
record for the host and device name; on the first acceptance that is the measurement itself, ratio
1). A ratio below `min_ratio` (training.acceptance_min_ratio, 0.5 by default) marks the figure
`below`, and the host's verdict is `below` when any figure is: a card throttled, a link down, a
host this loaded measures that way. Pure functions of plain dicts, so the training stage, the
command line and the tests judge alike.
"""

from __future__ import annotations

from typing import Any

from ascendbridge.hostcheck.expectations import Expectation

ACCEPTED, BELOW = "accepted", "below"
DEFAULT_MIN_RATIO = 0.5
LABELS = {
    "gemm_float32": "GEMM float32",
    "gemm_bfloat16": "GEMM bfloat16",
    "gemm_float16": "GEMM float16",
    "copy_bandwidth": "memory bandwidth (copy)",
    "host_to_device": "host-to-device copy",
}


def flat_figures(measurement: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The measurement's figures by name, an all-reduce's message sizes each one figure of its own."""
    figures = dict(measurement.get("figures") or {})
    allreduce = figures.pop("allreduce", None) or {}
    for size in allreduce.get("sizes") or ():
        figures[f"allreduce_{size['bytes']}"] = {**size, "unit": allreduce.get("unit", "GB/s")}
    if allreduce.get("na"):
        figures["allreduce"] = {"na": allreduce["na"]}
    return figures


def _order(name: str) -> tuple[int, int]:
    """The table's order: the figures of LABELS as listed, then all-reduce by message size."""
    if name in LABELS:
        return list(LABELS).index(name), 0
    return len(LABELS), int(name.removeprefix("allreduce_")) if name.startswith("allreduce_") else 0


def label(name: str) -> str:
    if name.startswith("allreduce_"):
        size = int(name.removeprefix("allreduce_"))
        return (
            f"all-reduce bus bandwidth, {size // 1024} KiB"
            if size < 1024**2
            else (f"all-reduce bus bandwidth, {size // 1024**2} MiB")
        )
    return LABELS.get(name, name.replace("_", " "))


def ratio(measured: float | None, expected: float | None) -> float | None:
    """measured / expected, None where either is missing or the expectation is not positive."""
    if measured is None or expected is None or expected <= 0:
        return None
    return measured / expected


def _expected(
    name: str, row: Expectation | None, baseline: dict[str, dict[str, Any]] | None
) -> tuple[float | None, str]:
    """The figure's expectation and where it comes from."""
    if row is not None and name in row.figures:
        return row.figures[name], f"{row.name} datasheet"
    value = (baseline or {}).get(name, {}).get("value")
    return (float(value), "this host's first acceptance") if value is not None else (None, "none")


def judge(
    measurement: dict[str, Any],
    row: Expectation | None,
    baseline: dict[str, Any] | None,
    min_ratio: float = DEFAULT_MIN_RATIO,
) -> dict[str, Any]:
    """The table people read: one row per figure (measured, spread, expected, source, ratio, below) and
    the verdict. `baseline`: the measurement of this host's first acceptance (None: this is the first)."""
    figures = flat_figures(measurement)
    base = flat_figures(baseline) if baseline is not None else figures
    rows = []
    for name, figure in sorted(figures.items(), key=lambda item: _order(item[0])):
        measured = figure.get("value")
        expected, source = _expected(name, row, base) if measured is not None else (None, "")
        value = ratio(measured, expected)
        rows.append(
            {
                "figure": name,
                "label": label(name),
                "measured": measured,
                "median": figure.get("median"),
                "low": figure.get("low"),
                "unit": figure.get("unit", ""),
                "note": figure.get("na") or figure.get("unsupported") or "",
                "expected": expected,
                "source": source,
                "ratio": None if value is None else round(value, 4),
                "below": value is not None and value < min_ratio,
            }
        )
    below = [r["figure"] for r in rows if r["below"]]
    ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
    return {
        "verdict": BELOW if below else ACCEPTED,
        "below": below,
        "worst_ratio": min(ratios) if ratios else None,
        "min_ratio": min_ratio,
        "device": row.name if row is not None else "unlisted device",
        "source_url": row.source_url if row is not None else "",  # the datasheet the table's row cites
        "load_average": measurement.get("load_average"),  # the host's load while measured, and its cores
        "cpus": measurement.get("cpus"),
        "rows": rows,
    }


def summary(judged: dict[str, Any]) -> str:
    """One line: the verdict, and each figure below its expectation with its numbers."""
    if judged["verdict"] == ACCEPTED:
        worst = judged["worst_ratio"]
        return f"host accepted: every figure at least {judged['min_ratio']:g} x its expectation" + (
            f" (lowest ratio {worst:.2f})" if worst is not None else ""
        )
    parts = [
        f"{r['label']} {r['measured']:g} {r['unit']} vs {r['expected']:g} expected (ratio {r['ratio']:.2f})"
        for r in judged["rows"]
        if r["below"]
    ]
    return f"host below expectation (ratio < {judged['min_ratio']:g}): " + "; ".join(parts)
