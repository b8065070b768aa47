"""The re-validation report: one JSON (the machine-readable truth), a Markdown table, a figure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ascendbridge.revalidation.compare import VERDICTS, Verdict

REPORT_JSON = "revalidation.json"
REPORT_MD = "revalidation.md"
REPORT_FIGURE = "revalidation.png"


def counts(verdicts: list[Verdict]) -> dict[str, int]:
    return {v: sum(1 for x in verdicts if x.verdict == v) for v in VERDICTS}


def markdown(verdicts: list[Verdict], meta: dict[str, Any]) -> str:
    lines = [
        f"# Re-validation on stack {meta['stack_id'] or '-'}",
        "",
        f"{meta['stack']}; tolerance {meta['tolerance']:.0%}; device {meta['device']}; {meta['finished_at']}",
        "",
        ", ".join(f"{n} {v}" for v, n in counts(verdicts).items()),
        "",
        "| package | verdict | change | baseline stack | summary |",
        "|---|---|---|---|---|",
    ]
    for v in verdicts:
        worst = v.worst
        change = f"{worst.worse_by():+.1%}" if worst and v.verdict != "broken" else "-"
        lines.append(
            f"| `{v.adaptation}` | {v.verdict} | {change} | {v.baseline_stack or '-'} | {v.summary.replace('|', '/')} |"
        )
    return "\n".join(lines) + "\n"


def figure(verdicts: list[Verdict], path: Path, tolerance: float) -> None:
    """Bars: how much worse each package got (its worst figure), the tolerance band shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"unchanged": "#8a8a8a", "improved": "#2e7d32", "regressed": "#c62828", "broken": "#000000"}
    names = [v.adaptation for v in verdicts]
    values = [100 * v.worst.worse_by() if v.worst and v.verdict != "broken" else 0.0 for v in verdicts]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.8 * len(names) + 2), 3.2))
    ax.axhspan(-100 * tolerance, 100 * tolerance, color="#eeeeee", label=f"±{tolerance:.0%} tolerance")
    ax.bar(names, values, color=[colors[v.verdict] for v in verdicts])
    for i, v in enumerate(verdicts):
        ax.annotate(v.verdict, (i, values[i]), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("worse than baseline (%)")
    ax.set_title("re-validation: worst latency / throughput change per package")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(verdicts: list[Verdict], out_dir: Path, meta: dict[str, Any]) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / REPORT_JSON, "markdown": out_dir / REPORT_MD, "figure": out_dir / REPORT_FIGURE}
    data = {**meta, "counts": counts(verdicts), "packages": [v.as_dict() for v in verdicts]}
    paths["json"].write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    paths["markdown"].write_text(markdown(verdicts, meta))
    figure(verdicts, paths["figure"], meta["tolerance"])
    return paths
