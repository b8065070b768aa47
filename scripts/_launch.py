"""The one bootstrap of the framework's `scripts/*.py` entry points.

Each entry point is `launch("<module>")`: the repository goes on sys.path (so a script runs from
any working directory), the module's `main()` (or the function named) runs and its return value is the exit code. Started
with a python that lacks the framework's dependencies (the system python instead of the
framework venv), it says how to run it in one line and exits 1.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import NoReturn

REPO_ROOT = Path(__file__).resolve().parent.parent


def launch(module: str, function: str = "main") -> NoReturn:
    sys.path.insert(0, str(REPO_ROOT))  # first: scripts/dashboard.py must not shadow the dashboard package
    try:
        main = getattr(importlib.import_module(module), function)
    except ModuleNotFoundError as exc:  # e.g. the system python instead of the framework venv
        sys.stderr.write(
            f"error: missing dependency '{exc.name}'; run with the framework environment: "
            f"uv run --project {REPO_ROOT} {Path(sys.argv[0]).resolve()} ...\n"
        )
        sys.exit(1)
    sys.exit(main())
