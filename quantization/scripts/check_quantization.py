"""Gate for the quantization stage: re-verify an adaptation's quantization evidence.

    uv run quantization/scripts/check_quantization.py --adapt NAME [--json] [--python TOOL_PYTHON] [--no-execute]

Checks the runtime copy, the calibration sample, the float model's and every checkpoint's digest
and each verdict against the standard, then evaluates every checkpoint again with the framework's
runtime in the tool environment; every figure must reproduce. Exit 0 when everything holds; 1 when
the gate fails; 2 on bad usage.
"""

from __future__ import annotations

import sys

from ascendbridge.gatekit.checker import executing_checker_main
from quantization.gate import check_adaptation


def main(argv: list[str]) -> int:
    return executing_checker_main(
        __doc__.splitlines()[0], argv, check_adaptation, "no fresh evaluation (digests, calibration, verdicts)"
    )


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
