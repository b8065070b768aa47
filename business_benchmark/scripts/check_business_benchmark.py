"""Gate for the business_benchmark stage: re-verify an adaptation's business evidence.

    uv run business_benchmark/scripts/check_business_benchmark.py --adapt NAME [--json] [--python PATH]

Recomputes every metric from the saved predictions, checks every set's digest against its data
card, re-runs a sample of items on the target and applies the pass rule. Exit 0 when everything
holds; 1 when the gate fails; 2 on bad usage.
"""

from __future__ import annotations

import sys

from ascendbridge.gatekit.checker import checker_main
from business_benchmark.gate import check_adaptation


def main(argv: list[str]) -> int:
    return checker_main(__doc__.splitlines()[0], argv, lambda args, directory: check_adaptation(directory, args.python))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
