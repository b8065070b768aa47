#!/usr/bin/env python3
"""Find a batch of models on the Hub, select, de-duplicate and register them (`--register`).

The same command as `board_ops.py discover`: `discover_models.py --help` lists the options.
Runs from any working directory, as `uv run scripts/discover_models.py ...`; see docs/discovery.md.
"""

from _launch import launch

if __name__ == "__main__":
    launch("ascendbridge.cli.board_ops", "discover_main")
