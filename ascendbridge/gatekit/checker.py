"""The checker side of the gate kit: the one checker command line and the one way to run one.

A stage's gate runs its checker (`<stage>/scripts/check_*.py`) as a separate process with the
framework's code (`run_checker`) and reads its `--json` report (`json_report`); a model run's
marked line is read with `marked_json`. Every checker's `main` is `checker_main`: the shared
arguments (--adapt NAME | --adaptation-dir DIR, --json, --python, plus the checker's own), the
report printed for people or as JSON, exit 0 pass / 1 fail / 2 bad input / 3 inconclusive (one `error:` line,
through ascendbridge/cli_errors.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ascendbridge.cli_errors import CliError, OneLineParser, run_guarded
from ascendbridge.gatekit.evidence import EvidenceError, adaptation_path, resolve_adaptation
from ascendbridge.gatekit.report import EXIT_INCONCLUSIVE, EXIT_PASSED, GateReport
from ascendbridge.stage_api import GateResult
from ascendbridge.stage_table import describe
from ascendbridge.workers.process import CommandResult, run_command


def _as_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def marked_json(output: str, marker: str) -> dict[str, Any] | None:
    """The JSON object on the last line that starts with `marker`, or None."""
    for line in reversed(output.splitlines()):
        if line.startswith(marker):
            return _as_object(line[len(marker) :])
    return None


def json_report(output: str) -> dict[str, Any] | None:
    """A checker's `--json` report: its last JSON-object line, or one pretty-printed object at the end."""
    for line in reversed(output.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            found = _as_object(line)
            if found is not None:
                return found
    start = output.find("{")
    return _as_object(output[start:]) if start >= 0 else None


def run_checker(argv: Sequence[str], timeout_s: float) -> tuple[dict[str, Any] | None, CommandResult]:
    """Run a checker contained (own process group, timeout, capped output); parse its report."""
    res = run_command(list(argv), timeout_s=timeout_s)
    return json_report(res.output), res


def checker_gate(script: Path, args: Sequence[str], timeout_s: float) -> GateResult:
    """A stage's gate: its checker run with the framework's interpreter and `--json`, passed only
    with exit 0 and a report that says so. A checker that gives no report fails with its last
    lines: that result's report is `{"output_tail": ...}` alone."""
    report, res = run_checker([sys.executable, str(script), *args, "--json"], timeout_s)
    if report is None:
        return GateResult(
            False,
            f"{Path(script).name} gave no report (exit {res.exit_code}): {res.tail(3)}",
            {"output_tail": res.tail(20)},
        )
    passed = res.exit_code == EXIT_PASSED and report.get("passed") is True
    inconclusive = res.exit_code == EXIT_INCONCLUSIVE and report.get("inconclusive") is True
    return GateResult(passed, str(report.get("summary", "")), report, inconclusive=inconclusive)


def package_gate(stage: str, adaptation_dir: Path) -> GateResult:
    """Stage `stage`'s gate as its row declares it (stage.toml): its first checker run on the
    package at `adaptation_dir`, within the row's `gate_timeout_s`."""
    row = describe(stage)
    return checker_gate(row.package / row.checkers[0], ["--adaptation-dir", str(adaptation_dir)], row.gate_timeout_s)


def checker_arguments(
    description: str,
    argv: Sequence[str],
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
    python: bool = True,
    must_exist: bool = True,
) -> tuple[argparse.Namespace, Path]:
    """The command line every evidence checker shares (--adapt NAME | --adaptation-dir DIR, --json,
    --python unless `python` is False, and what `extra` adds): (arguments, adaptation directory).
    The directory must exist unless `must_exist` is False (a stage before the package, discovery,
    uses only its name). A bad argument or place is a CliError (exit 2, one line)."""
    parser = OneLineParser(description=description)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--adapt", help="adaptation name (under ASCENDBRIDGE_ADAPTATIONS)")
    where.add_argument("--adaptation-dir", help="adaptation directory (anywhere)")
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")
    if python:
        parser.add_argument("--python", help="interpreter with torch (default: the adaptation's .venv)")
    if extra is not None:
        extra(parser)
    args = parser.parse_args(list(argv))
    try:
        if args.adapt:
            from ascendbridge.config import adaptations_dir

            find = resolve_adaptation if must_exist else adaptation_path
            return args, find(args.adapt, adaptations_dir())
    except EvidenceError as exc:
        raise CliError(str(exc)) from None
    directory = Path(args.adaptation_dir)
    if must_exist and not directory.is_dir():
        raise CliError(f"no adaptation directory {directory}")
    return args, directory


def checker_main(
    description: str,
    argv: Sequence[str],
    check: Callable[[argparse.Namespace, Path], GateReport],
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
    python: bool = True,
    must_exist: bool = True,
) -> int:
    """A checker's whole `main`: parse the shared command line (plus `extra`), run `check`
    (which raises CliError or ValueError for an input it refuses before checking anything), print
    the report (text, or JSON with --json) and return 0 pass / 1 fail / 2 bad input / 3 inconclusive."""

    def command() -> int:
        args, directory = checker_arguments(description, argv, extra, python, must_exist)
        try:
            report = check(args, directory)
        except ValueError as exc:  # a bad setting or option value, refused before the gate ran
            raise CliError(str(exc)) from None
        print(json.dumps(report.as_dict(), indent=2) if args.json else report.text())
        return report.exit_code()

    return run_guarded(command)


def executing_checker_main(
    description: str, argv: Sequence[str], check: Callable[..., GateReport], no_execute_skips: str
) -> int:
    """checker_main for a gate that re-executes the stage's work: `check(directory, python,
    execute=...)`, and --no-execute keeps it to the saved evidence (`no_execute_skips` says what
    that leaves out, for --help)."""

    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--no-execute", action="store_true", help=f"the saved evidence only: {no_execute_skips}")

    return checker_main(
        description,
        argv,
        lambda args, directory: check(directory, args.python, execute=not args.no_execute),
        extra=options,
    )
