"""Evidence basics every gate shares: resolving an adaptation by name, refused with the one evidence
error (`ab_runtime.metrics_file.EvidenceError`, which the metrics file's reader raises too), and a
stage's one evidence file read only once the code that wrote it is the framework's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ab_runtime.metrics_file import EvidenceError as EvidenceError
from ascendbridge.gatekit.integrity import runtime_problems
from ascendbridge.gatekit.report import untrusted_summary

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


def trusted_evidence(
    directory: Path, file: str, schema: str, what: str
) -> tuple[dict[str, Any] | None, str, list[str]]:
    """The code first (`ab_runtime/` as the framework ships it), then the stage's evidence `file` with
    its `schema`: (the evidence, "", []), or (None, the gate's one-line summary of why not, the code's
    problems) for a report that fails before any figure is read. `what` names the stage's evidence."""
    code = runtime_problems(directory)
    if code:
        return None, untrusted_summary(code), code
    try:
        evidence = json.loads((Path(directory) / file).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        return None, f"no readable {what} evidence: {exc}", []
    if not isinstance(evidence, dict) or evidence.get("schema") != schema:
        return None, f"{file}: not {what} evidence (schema != {schema})", []
    return evidence, "", []
