"""Gate: the optimized run's evidence is re-verified, and its speedup reproduced by execution.

    uv run optimization/scripts/check_accuracy_run_perf.py --adapt NAME [--json] [--python PATH]
        [--pairs 15] [--iters 5]

Checks the code first (wrapper as rendered, ab_runtime/ as the framework's), then the perf_*
evidence (benchmark metrics schema, trace, accuracy recomputed from the saved outputs, sample 0
re-executed with the chosen passes, the notes' record of it), then re-runs a paired,
interleaved measurement of baseline vs the chosen passes with the framework's runtime, pair by
pair (at least 5, at most --pairs): passed when its interval's low end clears 1 + min_gain, as
the optimizer's confirmation had to, the claim is within x1.4 of that low end and the interval is
no wider than x2.5; failed when its high end is below the bar or the claimed speedup is more than
x1.4 above it (the claim taken at the low end of its own interval, the notes' `final.interval`);
inconclusive when still undecided at --pairs. It measures
where the perf run timed: pinned to the cores and torch threads its evidence recorded (as the
team lead's gate runs on the job's cores), and says so on its first line.
Exit 0 pass, 1 fail, 2 bad usage, 3 inconclusive (too noisy now: re-run the gate later).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ab_runtime.optimize import quick
from ascendbridge.cli_errors import CliError
from ascendbridge.gatekit.checker import checker_main
from optimization.gate import OptimizationGateReport, apply_placement, check_perf_gate


def _measurement(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pairs", type=int, default=quick.GATE_MAX_PAIRS, help="at most this many pairs (>= 5)")
    parser.add_argument("--iters", type=int, default=5)


def check(args: argparse.Namespace, directory: Path) -> OptimizationGateReport:
    if args.pairs < 5 or args.iters < 1:
        raise CliError("--pairs must be >= 5 and --iters >= 1")
    placement = apply_placement(directory)  # re-measured where the perf run timed, as the team lead's gate is
    report = check_perf_gate(directory, args.python, args.pairs, args.iters)
    report.placement = placement
    return report


def main(argv: list[str]) -> int:
    return checker_main(__doc__.splitlines()[0], argv, check, extra=_measurement)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
