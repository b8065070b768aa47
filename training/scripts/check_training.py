"""Gate for the training stage: re-verify an adaptation's training evidence.

    uv run training/scripts/check_training.py --adapt NAME [--json] [--python PYTHON] [--no-execute]

Re-renders train.py and checks ab_runtime/ byte for byte, recomputes every figure from the saved
logs, then (with the framework's ab_runtime in the package's interpreter) recomputes the baseline
contract and the evaluation verdicts, checks the checkpoints' digests and the step log against
them, re-runs a step from a checkpoint and reloads the final weights. Exit 0 when everything
holds; 1 when the gate fails; 2 on bad usage.
"""

from __future__ import annotations

import sys

from ascendbridge.gatekit.checker import executing_checker_main
from training.gate import check_adaptation


def main(argv: list[str]) -> int:
    return executing_checker_main(
        __doc__.splitlines()[0], argv, check_adaptation, "no re-run (code, configs and figures)"
    )


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
