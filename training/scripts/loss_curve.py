"""Draw a training run's loss curve: loss and gradient norm per step, the held-out loss before and after.

    uv run python training/scripts/loss_curve.py --out RUN_DIR [--png PATH]

Reads RUN_DIR/metrics.jsonl (and evaluation.json when present), writes RUN_DIR/loss_curve.png.
Framework side (matplotlib is in the framework's lock, not in the packages'); exit 2 on a run
directory without a step log.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from training.figures import LOSS_CURVE, draw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the run's output directory")
    parser.add_argument("--png", type=Path, help="where to write the PNG (default RUN_DIR/loss_curve.png)")
    args = parser.parse_args(argv)
    if not (args.out / "metrics.jsonl").is_file():
        print(f"error: {args.out}: no metrics.jsonl (not a training run directory)", file=sys.stderr)
        return 2
    print(draw(args.out, args.png or args.out / LOSS_CURVE))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
