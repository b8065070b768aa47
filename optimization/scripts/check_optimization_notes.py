"""Gate: optimization_notes.json is complete and internally consistent.

    uv run optimization/scripts/check_optimization_notes.py --adapt NAME [--json]

Recomputes every paired figure from its raw samples (speedup = ratio of the medians, interval,
noise), re-derives each keep decision, checks the final result is one of the measured rows,
warmup symmetric, runtime_only honest, and accuracy_run_perf.py applying exactly the chosen
passes. Exit 0 pass, 1 fail, 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys

from _cli import add_where, resolve  # sets up the repository import path

from ascendbridge.gatekit.evidence import EvidenceError
from optimization.gate import check_notes_gate


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_where(parser)
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")
    args = parser.parse_args(argv)
    try:
        directory = resolve(args)
    except EvidenceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = check_notes_gate(directory)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        for problem in report.problems:
            print(f"  - {problem}")
        print(("PASS: " if report.passed else "FAIL: ") + report.summary)
    return 0 if report.passed else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
