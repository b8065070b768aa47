"""Evidence file names and discovery (framework side, no torch).

Every benchmark run leaves three files in its adaptation directory, named
`<kind>_<device>_<dtype>_<mode>_<dataset>.<ext>`; the metrics file lists the other two by name,
so discovery never has to parse names that may themselves contain underscores.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

METRICS_SCHEMA = "ascendbridge.benchmark_metrics/1"
OUTPUTS_FORMAT = "ascendbridge.outputs/1"
KINDS = {"outputs": "pt", "benchmark_metrics": "json", "trace": "json"}
_ADAPTATION_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_PART_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*(_[A-Za-z0-9.-]+)*$")


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


def print_checks(rows: list[tuple[str, bool, Optional[str], list[str], list[str]]], label_width: int,
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


def evidence_name(kind: str, device: str, dtype: str, mode: str, dataset: str) -> str:
    """`<kind>_<device>_<dtype>_<mode>_<dataset>.<ext>`; parts are checked to be path-safe."""
    if kind not in KINDS:
        raise EvidenceError(f"unknown evidence kind '{kind}'")
    for part in (device, dtype, mode, dataset):
        if not _PART_RE.match(part):
            raise EvidenceError(f"'{part}' is not a valid evidence name part")
    return f"{kind}_{device}_{dtype}_{mode}_{dataset}.{KINDS[kind]}"


@dataclass(frozen=True)
class EvidenceSet:
    """One run's metrics file and the files it names."""

    metrics_path: Path
    metrics: dict[str, Any]

    @property
    def directory(self) -> Path:
        return self.metrics_path.parent

    def named(self, key: str) -> Optional[Path]:
        name = (self.metrics.get("evidence") or {}).get(key)
        if not isinstance(name, str) or "/" in name or "\\" in name or name.startswith("."):
            return None
        return self.directory / name

    @property
    def run(self) -> dict[str, Any]:
        return self.metrics.get("run") or {}

    @property
    def label(self) -> str:
        """device/dtype/mode/dataset. The optimization's perf runs have files of their own
        (perf_metrics_*), so a benchmark label never names one."""
        r = self.run
        return f"{r.get('device', '?')}/{r.get('dtype', '?')}/{r.get('mode', '?')}/{r.get('dataset', '?')}"


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


def find_evidence(adaptation_dir: Path) -> list[EvidenceSet]:
    """Every `benchmark_metrics_*.json` in the adaptation, loaded; unreadable ones raise."""
    return [EvidenceSet(p, load_metrics(p)) for p in sorted(Path(adaptation_dir).glob("benchmark_metrics_*.json"))]
