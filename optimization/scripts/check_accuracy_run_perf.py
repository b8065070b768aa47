"""Gate: the optimized run's evidence is re-verified, and its speedup reproduced by execution.

    uv run optimization/scripts/check_accuracy_run_perf.py --adapt NAME [--json] [--python PATH]
        [--tolerance 0.5] [--pairs 5] [--iters 3]

Checks the *_perf evidence (benchmark metrics schema, trace, accuracy recomputed from the saved
outputs with the spec's thresholds, the notes' record of it), then re-runs a short paired,
interleaved measurement of baseline vs the chosen passes with the framework's runtime: the
re-measured speedup must reach (1 - tolerance) x the reported one.
Exit 0 pass, 1 fail, 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys

from _cli import add_where, resolve  # noqa: I001  (sets up the repository import path)
from benchmark.evidence import EvidenceError
from optimization.gate import DEFAULT_TOLERANCE, check_perf_gate


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_where(parser)
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")
    parser.add_argument("--python", help="interpreter with torch (default: the adaptation's .venv)")
    parser.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--iters", type=int, default=5)
    args = parser.parse_args(argv)
    if not 0 <= args.tolerance < 1 or args.pairs < 5 or args.iters < 1:
        print("error: --tolerance must be in [0, 1), --pairs >= 5, --iters >= 1", file=sys.stderr)
        return 2
    try:
        directory = resolve(args)
    except EvidenceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = check_perf_gate(directory, args.python, args.tolerance, args.pairs, args.iters)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        for problem in report.problems:
            print(f"  - {problem}")
        print(("PASS: " if report.passed else "FAIL: ") + report.summary)
    return 0 if report.passed else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
