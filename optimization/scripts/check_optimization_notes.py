"""Gate: optimization_notes.json is complete and internally consistent.

    uv run optimization/scripts/check_optimization_notes.py --adapt NAME [--json]

Recomputes every paired figure from its raw samples (speedup = ratio of the medians, interval,
noise), re-derives each keep decision, checks the final result is one of the measured rows,
warmup symmetric, runtime_only honest, and accuracy_run_perf.py applying exactly the chosen
passes. Exit 0 pass, 1 fail, 2 bad usage.
"""

from __future__ import annotations

import sys

from ascendbridge.gatekit.checker import checker_main
from optimization.gate import check_notes_gate


def main(argv: list[str]) -> int:
    return checker_main(
        __doc__.splitlines()[0], argv, lambda args, directory: check_notes_gate(directory), python=False
    )


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
