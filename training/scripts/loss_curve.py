"""Draw a training run's loss curve: loss and gradient norm per step, the held-out loss before and after.

    uv run python training/scripts/loss_curve.py --out RUN_DIR [--png PATH]

Reads RUN_DIR/metrics.jsonl (and evaluation.json when present), writes RUN_DIR/loss_curve.png.
Framework side (matplotlib is in the framework's lock, not in the packages'); exit 2 on a run
directory without a step log.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ascendbridge.gatekit.summary import pyplot, save_figure


def draw(run_dir: Path, png: Path) -> Path:
    steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the run's output directory")
    parser.add_argument("--png", type=Path, help="where to write the PNG (default RUN_DIR/loss_curve.png)")
    args = parser.parse_args(argv)
    if not (args.out / "metrics.jsonl").is_file():
        print(f"error: {args.out}: no metrics.jsonl (not a training run directory)", file=sys.stderr)
        return 2
    print(draw(args.out, args.png or args.out / "loss_curve.png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
