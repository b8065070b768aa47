#!/usr/bin/env python3
"""Show what discovery learns about a model: `get_model_info.py MODEL [--source] [--json]`.

Runs from any working directory, as `uv run scripts/get_model_info.py ...`; see docs/discovery.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

try:
    from ascendbridge.discovery.cli import main
except ModuleNotFoundError as exc:  # e.g. the system python instead of the framework venv
    sys.stderr.write(
        f"error: missing dependency '{exc.name}'; run with the framework environment: "
        f"uv run --project {REPO_ROOT} {Path(__file__).resolve()} ...\n"
    )
    sys.exit(1)

if __name__ == "__main__":
    sys.exit(main())
