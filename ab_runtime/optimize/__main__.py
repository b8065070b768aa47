"""`python -m ab_runtime.optimize`: the search (optimize.py) keeps its one command line."""

import sys

from .optimize import main

raise SystemExit(main(sys.argv[1:]))
