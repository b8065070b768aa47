#!/usr/bin/env python3
"""Start the dashboard (same as `python -m dashboard`): uv run scripts/dashboard.py [--port N]."""

from _launch import launch

if __name__ == "__main__":
    launch("dashboard.__main__")
