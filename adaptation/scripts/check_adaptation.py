"""The adaptation gate's command line (the checks are adaptation/gate.py).

    check_adaptation.py --adapt NAME [--adaptations-dir DIR] [--device cpu] [--json] [--no-run]

Verifies a generated package by inspecting it and (without --no-run) running its demo; prints
each check, or the report as one JSON line with --json. Exit 0 only when every check passes, 1
when one fails, 2 on bad input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from adaptation.gate import PROFILES, Report, gate
from ascendbridge.cli_errors import CliError, OneLineParser, run_guarded
from ascendbridge.config import adaptations_dir


def print_report(report: Report) -> None:
    for check in report.checks:
        print(f"{'PASS' if check.passed else 'FAIL'} {check.name}: {check.detail}")
    failed = sum(not c.passed for c in report.checks)
    verdict = "PASSED" if report.passed else f"FAILED ({failed} of {len(report.checks)} checks failed)"
    print(f"adaptation {report.adaptation} on {report.device}: {verdict}")


def main(argv: list[str] | None = None) -> int:
    """Exit 0 pass, 1 fail, 2 bad input (one `error:` line; with --json the report names it too)."""
    return run_guarded(lambda: _run(sys.argv[1:] if argv is None else argv))


def _run(argv: list[str]) -> int:
    parser = OneLineParser(description="Verify a generated adaptation by running it.")
    parser.add_argument("--adapt", required=True, metavar="NAME", help="adaptation name (directory)")
    parser.add_argument(
        "--adaptations-dir",
        type=Path,
        default=None,
        help="where adaptations live (default: ASCENDBRIDGE_ADAPTATIONS or <repo>/adaptations)",
    )
    parser.add_argument(
        "--device",
        choices=sorted(PROFILES),
        default="cpu",
        help="device the demo must run on; its profile (extra) is synced",
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON line")
    parser.add_argument("--no-run", action="store_true", help="static checks and uv lock --check only")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for the demo run")
    args = parser.parse_args(argv)
    root = (args.adaptations_dir or adaptations_dir()).expanduser()
    report = gate(args.adapt, root, args.device, not args.no_run, args.timeout)
    if args.json:
        print(json.dumps(report.as_dict(), sort_keys=True))
    elif report.error is None:
        print_report(report)
    if report.error is not None:
        raise CliError(report.error)
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
