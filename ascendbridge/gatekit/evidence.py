"""Evidence basics every gate shares: resolving an adaptation by name, refused with the one evidence
error (`ab_runtime.metrics_file.EvidenceError`, which the metrics file's reader raises too)."""

from __future__ import annotations

import re
from pathlib import Path

from ab_runtime.metrics_file import EvidenceError as EvidenceError

_ADAPTATION_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


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
