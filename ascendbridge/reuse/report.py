"""How the main job shows its reuse check: one row per model (what it reused, where it re-runs from
and why) and one line for the whole board."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from ascendbridge.reuse.check import Decision


def per_model(decisions: Sequence[Decision]) -> dict[str, list[Decision]]:
    out: dict[str, list[Decision]] = {}
    for d in decisions:
        out.setdefault(d.model_id, []).append(d)
    return out


def decisions_table(decisions: Sequence[Decision]) -> Table:
    table = Table(title="re-runs: completed stages checked against their recorded inputs and evidence")
    for column in ("model", "reused (earlier attempt)", "runs again from"):
        table.add_column(column, overflow="fold")
    for model_id, rows in per_model(decisions).items():
        reused = ", ".join(f"{d.stage} ({d.attempt})" for d in rows if d.action == "reused") or "-"
        rerun = next((f"{d.stage}: {d.reason}" for d in rows if d.action == "rerun"), "-")
        table.add_row(model_id, reused, rerun)
    return table


def summary_line(decisions: Sequence[Decision]) -> str:
    reused = sum(1 for d in decisions if d.action == "reused")
    rerun = sorted({d.model_id for d in decisions if d.action == "rerun"})
    return f"reused {reused} completed stage(s); {len(rerun)} model(s) run again" + (
        f": {', '.join(rerun)}" if rerun else ""
    )
