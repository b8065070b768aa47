"""Gate for the benchmark stage: re-verify an adaptation's accuracy_run evidence.

    uv run benchmark/scripts/check_accuracy_run.py --adapt NAME [--json] [--python PATH]

Re-times with the placement the run recorded (its cores and threads, benchmark.gate.apply_placement)
and prints it (`placement:` line; `placement` in --json). Exit 0 when every evidence set is
complete, consistent and re-derivable from the saved outputs and the target-dtype run passed
accuracy; 1 when the gate fails; 3 when only a timing check is left undecided by the host's load
(inconclusive: re-run the gate later); 2 on bad usage (a bad ASCENDBRIDGE_LATENCY_BAND included).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ascendbridge.gatekit.checker import checker_main
from benchmark.gate import AccuracyGateReport, apply_placement, check_adaptation, latency_band


def check(args: argparse.Namespace, directory: Path) -> AccuracyGateReport:
    latency_band()  # a bad band is bad input (ValueError): refused before anything runs
    placement = apply_placement(directory)
    report = check_adaptation(directory, args.python)
    report.placement = placement
    return report


def main(argv: list[str]) -> int:
    return checker_main(__doc__.splitlines()[0], argv, check)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
