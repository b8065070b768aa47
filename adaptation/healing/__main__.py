"""Entry point for `python -m adaptation.healing` (see cli.py)."""

from adaptation.healing.cli import main

raise SystemExit(main())
