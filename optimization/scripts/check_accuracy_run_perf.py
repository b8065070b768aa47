"""Gate: the optimized run's evidence is re-verified, and its speedup reproduced by execution.

    uv run optimization/scripts/check_accuracy_run_perf.py --adapt NAME [--json] [--python PATH]
        [--pairs 5] [--iters 3]

Checks the code first (wrapper as rendered, ab_runtime/ as the framework's), then the perf_*
evidence (benchmark metrics schema, trace, accuracy recomputed from the saved outputs, sample 0
re-executed with the chosen passes, the notes' record of it), then re-runs a paired,
interleaved measurement of baseline vs the chosen passes with the framework's runtime: its
interval's low end must clear 1 + min_gain, as the optimizer's confirmation had to.
Exit 0 pass, 1 fail, 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys

from _cli import add_where, resolve  # sets up the repository import path

from ascendbridge.gatekit.evidence import EvidenceError
from optimization.gate import check_perf_gate


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_where(parser)
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")
    parser.add_argument("--python", help="interpreter with torch (default: the adaptation's .venv)")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--iters", type=int, default=5)
    args = parser.parse_args(argv)
    if args.pairs < 5 or args.iters < 1:
        print("error: --pairs must be >= 5 and --iters >= 1", file=sys.stderr)
        return 2
    try:
        directory = resolve(args)
    except EvidenceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = check_perf_gate(directory, args.python, args.pairs, args.iters)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        for problem in report.problems:
            print(f"  - {problem}")
        print(("PASS: " if report.passed else "FAIL: ") + report.summary)
    return 0 if report.passed else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
