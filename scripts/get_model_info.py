#!/usr/bin/env python3
"""Show what discovery learns about a model: `get_model_info.py MODEL [--source] [--json]`.

Runs from any working directory, as `uv run scripts/get_model_info.py ...`; see docs/discovery.md.
"""

from _launch import launch

if __name__ == "__main__":
    launch("ascendbridge.cli.model_info_command")
