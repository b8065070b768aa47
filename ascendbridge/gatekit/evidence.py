"""Evidence plumbing every gate shares: the one evidence error, the checker command line
(--adapt NAME | --adaptation-dir DIR, --json, --python), its people-facing output, and the metrics
file's schema, which benchmark_run and the optimizer's perf_run both write."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

METRICS_SCHEMA = "ascendbridge.benchmark_metrics/1"  # ab_runtime/outputs.py writes the same string
_ADAPTATION_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class EvidenceError(ValueError):
    """Evidence that is missing, unreadable or not what a benchmark run writes."""


def resolve_adaptation(name: str, root: Path) -> Path:
    """`root/name` for a safe, existing adaptation name; EvidenceError with one line otherwise."""
    if not _ADAPTATION_RE.match(name or "") or ".." in name:
        raise EvidenceError(f"'{name}' is not an adaptation name (lower-case letters, digits, . _ -)")
    path = Path(root) / name
    if not path.is_dir():
        raise EvidenceError(f"no adaptation '{name}' in {root}")
    return path


def checker_arguments(description: str, argv: list[str]) -> tuple[argparse.Namespace, Path]:
    """The command line every evidence checker shares (--adapt NAME | --adaptation-dir DIR, --json,
    --python): (arguments, adaptation directory); EvidenceError with one line for a bad place."""
    parser = argparse.ArgumentParser(description=description)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--adapt", help="adaptation name (under ASCENDBRIDGE_ADAPTATIONS)")
    where.add_argument("--adaptation-dir", help="adaptation directory (anywhere)")
    parser.add_argument("--json", action="store_true", help="print the full report as JSON")
    parser.add_argument("--python", help="interpreter with torch (default: the adaptation's .venv)")
    args = parser.parse_args(argv)
    if args.adapt:
        from ascendbridge.config import adaptations_dir

        return args, resolve_adaptation(args.adapt, adaptations_dir())
    directory = Path(args.adaptation_dir)
    if not directory.is_dir():
        raise EvidenceError(f"no adaptation directory {directory}")
    return args, directory


def print_checks(rows: list[tuple[str, bool, str | None, list[str], list[str]]], label_width: int,
                 verdict_word: str, passed: bool, summary: str) -> None:
    """Checker output for people: per evidence set (label, consistent, verdict, problems, notes) a
    line with its problems and notes under it, then PASS/FAIL and the summary."""
    for label, consistent, verdict, problems, notes in rows:
        print(f"{label:{label_width}s} evidence {'ok' if consistent else 'FAILED':6s} {verdict_word} {verdict or '-'}")
        for problem in problems:
            print(f"    - {problem}")
        for note in notes:
            print(f"    ({note})")
    print(("PASS: " if passed else "FAIL: ") + summary)


def load_metrics(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise EvidenceError(f"{path.name}: file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EvidenceError(f"{path.name}: not valid JSON ({exc.__class__.__name__})") from None
    if not isinstance(data, dict) or data.get("schema") != METRICS_SCHEMA:
        raise EvidenceError(f"{path.name}: not a benchmark metrics file (schema != {METRICS_SCHEMA})")
    return data
