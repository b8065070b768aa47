#!/usr/bin/env python3
"""Find a batch of models on the Hub, select, de-duplicate and register them (`--register`).

The same command as `board_ops.py discover`: `discover_models.py --help` lists the options.
Runs from any working directory, as `uv run scripts/discover_models.py ...`; see docs/discovery.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

try:
    from ascendbridge.cli.board_ops import discover_main as main
except ModuleNotFoundError as exc:  # e.g. the system python instead of the framework venv
    sys.stderr.write(
        f"error: missing dependency '{exc.name}'; run with the framework environment: "
        f"uv run --project {REPO_ROOT} {Path(__file__).resolve()} ...\n"
    )
    sys.exit(1)

if __name__ == "__main__":
    sys.exit(main())
