"""Evidence basics every gate shares: the one evidence error, resolving an adaptation by name, and
the metrics file's schema, which benchmark_run and the optimizer's perf_run both write."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

METRICS_SCHEMA = "ascendbridge.benchmark_metrics/1"  # ab_runtime/outputs.py writes the same string
_ADAPTATION_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class EvidenceError(ValueError):
    """Evidence that is missing, unreadable or not what a benchmark run writes."""


def adaptation_path(name: str, root: Path) -> Path:
    """`root/name` for a safe adaptation name, whether or not it exists yet; EvidenceError with one line
    otherwise."""
    if not _ADAPTATION_RE.match(name or "") or ".." in name:
        raise EvidenceError(f"'{name}' is not an adaptation name (lower-case letters, digits, . _ -)")
    return Path(root) / name


def resolve_adaptation(name: str, root: Path) -> Path:
    """`root/name` for a safe, existing adaptation name; EvidenceError with one line otherwise."""
    path = adaptation_path(name, root)
    if not path.is_dir():
        raise EvidenceError(f"no adaptation '{name}' in {root}")
    return path


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
