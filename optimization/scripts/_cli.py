"""Shared argument handling of the optimization scripts: --adapt NAME or --adaptation-dir PATH."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # `uv run optimization/scripts/...py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from ascendbridge.config import adaptations_dir  # noqa: E402
from ascendbridge.gatekit.evidence import EvidenceError, resolve_adaptation  # noqa: E402


def add_where(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--adapt", help="adaptation name (under ASCENDBRIDGE_ADAPTATIONS)")
    where.add_argument("--adaptation-dir", help="adaptation directory (anywhere)")


def resolve(args: argparse.Namespace) -> Path:
    """The adaptation directory; EvidenceError with one line when it does not exist."""
    if args.adapt:
        return resolve_adaptation(args.adapt, adaptations_dir())
    directory = Path(args.adaptation_dir)
    if not directory.is_dir():
        raise EvidenceError(f"no adaptation directory {directory}")
    return directory
