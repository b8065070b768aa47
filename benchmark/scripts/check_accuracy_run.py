"""Gate for the benchmark stage: re-verify an adaptation's accuracy_run evidence.

    uv run benchmark/scripts/check_accuracy_run.py --adapt NAME [--json] [--python PATH]

Exit 0 when every evidence set is complete, consistent and re-derivable from the saved outputs
and the target-dtype run passed accuracy; 1 when the gate fails; 2 on bad usage (a bad
ASCENDBRIDGE_LATENCY_BAND included).
"""

from __future__ import annotations

import json
import sys

from ascendbridge.gatekit.evidence import EvidenceError, checker_arguments, print_checks
from benchmark.gate import check_adaptation, latency_band


def main(argv: list[str]) -> int:
    try:
        args, directory = checker_arguments(__doc__.splitlines()[0], argv)
        latency_band()
    except (EvidenceError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = check_adaptation(directory, args.python)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print_checks([(r.label, r.consistent, r.verdict, r.problems, r.notes) for r in report.runs], 40,
                     "accuracy", report.passed, report.summary)
    return 0 if report.passed else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
