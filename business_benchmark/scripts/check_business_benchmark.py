"""Gate for the business_benchmark stage: re-verify an adaptation's business evidence.

    uv run business_benchmark/scripts/check_business_benchmark.py --adapt NAME [--json] [--python PATH]

Recomputes every metric from the saved predictions, checks every set's digest against its data
card, re-runs a sample of items on the target and applies the pass rule. Exit 0 when everything
holds; 1 when the gate fails; 2 on bad usage.
"""

from __future__ import annotations

import json
import sys

from ascendbridge.gatekit.evidence import EvidenceError, checker_arguments, print_checks
from business_benchmark.gate import check_adaptation


def main(argv: list[str]) -> int:
    try:
        args, directory = checker_arguments(__doc__.splitlines()[0], argv)
    except EvidenceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = check_adaptation(directory, args.python)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print_checks([(c.metrics_file, c.consistent, c.verdict, c.problems, c.notes) for c in report.evidence],
                     50, "verdict", report.passed, report.summary)
    return 0 if report.passed else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
