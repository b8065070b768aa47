"""Gate for the business_benchmark stage: re-verify an adaptation's business evidence.

    uv run business_benchmark/scripts/check_business_benchmark.py --adapt NAME [--json] [--python PATH]

Recomputes every metric from the saved predictions, checks every set's digest against its data
card, re-runs a sample of items on the target and applies the pass rule. Exit 0 when everything
holds; 1 when the gate fails; 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ascendbridge.config import adaptations_dir
from benchmark.evidence import EvidenceError, resolve_adaptation
from business_benchmark.gate import check_adaptation


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--adapt", help="adaptation name (under ASCENDBRIDGE_ADAPTATIONS)")
    where.add_argument("--adaptation-dir", help="adaptation directory (anywhere)")
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")
    parser.add_argument("--python", help="interpreter with torch (default: the adaptation's .venv)")
    args = parser.parse_args(argv)
    try:
        if args.adapt:
            directory = resolve_adaptation(args.adapt, adaptations_dir())
        else:
            directory = Path(args.adaptation_dir)
            if not directory.is_dir():
                raise EvidenceError(f"no adaptation directory {directory}")
    except EvidenceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = check_adaptation(directory, args.python)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        for check in report.evidence:
            print(f"{check.metrics_file:50s} evidence {'ok' if check.consistent else 'FAILED':6s} "
                  f"verdict {check.verdict or '-'}")
            for problem in check.problems:
                print(f"    - {problem}")
            for note in check.notes:
                print(f"    ({note})")
        print(("PASS: " if report.passed else "FAIL: ") + report.summary)
    return 0 if report.passed else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
