#!/usr/bin/env python3
"""Start the dashboard (same as `python -m dashboard`): uv run scripts/dashboard.py [--port N]."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dashboard.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
