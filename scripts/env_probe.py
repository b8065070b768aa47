"""Measure this machine's model environment and store it on the board.

    uv run scripts/env_probe.py --adapt NAME [--device auto|npu|cuda|cpu] [--json]
    uv run scripts/env_probe.py --python PATH ...      (any interpreter with torch)
    uv run scripts/env_probe.py --show                 (the last stored probe)

Records torch / torch_npu / transformers / CANN versions, device count and names, and measured
GEMM throughput per dtype and copy bandwidth (used by `benchmark_tool.py roofline`).
"""

from __future__ import annotations

import json
import sys

from ascendbridge.board.store import BoardStore
from ascendbridge.cli.interpreter import add_interpreter, chosen_interpreter
from ascendbridge.cli_errors import EXIT_FAILURE, CliError, OneLineParser, run_guarded
from ascendbridge.config import board_path
from benchmark.probe import ProbeError, latest_probe, run_probe, store_probe, summary_line


def main(argv: list[str]) -> int:
    """Exit 0 probed (or shown), 1 the board or the probe failed, 2 bad input (one `error:` line)."""
    return run_guarded(lambda: _run(argv))


def _run(argv: list[str]) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    where = add_interpreter(parser)
    where.add_argument("--show", action="store_true", help="print the last stored probe")
    parser.add_argument("--budget-s", type=float, default=0.4, help="seconds per microbenchmark")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    chosen = chosen_interpreter(args)  # the input first: a bad --adapt or --python is refused before the board
    python = chosen[0] if chosen else None
    store = BoardStore(board_path())
    try:
        if python is None:
            probe = latest_probe(store)
            if probe is None:
                raise CliError(
                    "no environment probe on the board yet (run scripts/env_probe.py --adapt NAME)", EXIT_FAILURE
                )
        else:
            print(f"probing {args.device} with {python} ...", file=sys.stderr)
            probe = run_probe(python, args.device, args.budget_s)
            store_probe(store, probe)
        print(json.dumps(probe, indent=2, sort_keys=True) if args.json else summary_line(probe))
        return 0
    except ProbeError as exc:
        raise CliError(str(exc), EXIT_FAILURE) from None
    finally:
        store.close()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
