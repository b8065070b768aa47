"""Entry point for `python -m healing` (see cli.py)."""

from healing.cli import main

raise SystemExit(main())
