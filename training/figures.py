"""The training figures: what the stage proposes for the board and the gate recomputes, and the loss curve.

Every figure is derived from the saved evidence (train_result.json, metrics.jsonl, contract.json,
supervision.json), so the gate recomputes the same dictionary from the same files. The held-out
verdict is a number on the board: improved 1, flat 0, worse -1.
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import median
from typing import Any

from ascendbridge.gatekit.summary import pyplot, save_figure

LOSS_CURVE = "loss_curve.png"
FIGURES_FILE = "figures.json"  # in the run directory: the figures the stage proposed
VERDICT_VALUE = {"improved": 1.0, "flat": 0.0, "worse": -1.0}


def step_log(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def training_figures(result: dict[str, Any], steps: list[dict[str, Any]], contract: dict[str, Any],
                     supervision: dict[str, Any]) -> dict[str, float]:
    evaluation = result["evaluation"]
    rates = [float(s["tokens_per_s"]) for s in steps if s.get("tokens_per_s")]
    figures = {
        "steps": float(len(steps)),
        "loss_first": float(steps[0]["loss"]), "loss_last": float(steps[-1]["loss"]),
        "eval_loss_before": float(evaluation["before"]["loss"]), "eval_loss_after": float(evaluation["after"]["loss"]),
        "eval_verdict": VERDICT_VALUE[evaluation["verdict"]["verdict"]],
        "eval_gap": float(evaluation["verdict"]["gap"] or 0.0),
        "contract_passed": 1.0 if contract.get("verdict", {}).get("passed") else 0.0,
        "tokens_per_s": median(rates) if rates else 0.0,
        "step_time_s": median(float(s["step_time_s"]) for s in steps),
        "peak_memory_bytes": float(max(int(s.get("peak_memory_bytes") or 0) for s in steps)),
        "hangs": float(supervision.get("hangs", 0)), "restarts": float(supervision.get("restarts", 0)),
    }
    for key in ("perplexity", "masked_accuracy"):
        if key in evaluation["after"]:
            figures[f"eval_{key}_before"] = float(evaluation["before"][key])
            figures[f"eval_{key}_after"] = float(evaluation["after"][key])
    return figures


def draw(run_dir: Path, png: Path) -> Path:
    """Loss and gradient norm per step, with the held-out loss before and after."""
    steps = step_log(run_dir)
    evaluation: dict[str, Any] = {}
    if (run_dir / "evaluation.json").is_file():
        evaluation = json.loads((run_dir / "evaluation.json").read_text())
    fig, (loss_ax, grad_ax) = pyplot().subplots(1, 2, figsize=(10, 3.6))
    x = [s["step"] for s in steps]
    loss_ax.plot(x, [s["loss"] for s in steps], label="train loss")
    if evaluation:
        loss_ax.scatter([0, x[-1]], [evaluation["before"]["loss"], evaluation["after"]["loss"]], color="C3",
                        zorder=3, label=f"held-out ({evaluation['verdict']['verdict']})")
    loss_ax.set(xlabel="step", ylabel="loss", title="loss")
    loss_ax.legend()
    grad_ax.plot(x, [s["grad_norm"] for s in steps], color="C1")
    grad_ax.set(xlabel="step", ylabel="global gradient norm", title="gradient norm")
    return save_figure(fig, png)
