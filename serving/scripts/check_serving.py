"""Gate for the serving stage: re-verify an adaptation's serving evidence.

    uv run serving/scripts/check_serving.py --adapt NAME [--json] [--python SERVE_PYTHON] [--no-execute]

Re-exports the reference with the framework's runtime, recomputes the plans and re-renders serve/
byte for byte, recomputes every figure from the saved requests and responses, then replays a
sample of the requests on a fresh server. Exit 0 when everything holds; 1 when the gate fails;
2 on bad usage.
"""

from __future__ import annotations

import sys

from ascendbridge.gatekit.checker import executing_checker_main
from serving.gate import check_adaptation


def main(argv: list[str]) -> int:
    return executing_checker_main(
        __doc__.splitlines()[0], argv, check_adaptation, "no re-export, no fresh server (figures, plan and artefacts)"
    )


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
