#!/usr/bin/env python3
"""Inspect and steer the AscendBridge board: `board_ops.py --help` lists the subcommands.

Runs from any working directory, as `uv run scripts/board_ops.py ...` or with the framework
venv's python; see docs/board.md.
"""

from _launch import launch

if __name__ == "__main__":
    launch("ascendbridge.cli.board_ops")
