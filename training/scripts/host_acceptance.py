"""Accept this host by hand: measure it, judge it against the expectations, print the table, record it.

    uv run python training/scripts/host_acceptance.py --adapt NAME [--device cpu] [--fresh] [--json]
    uv run python training/scripts/host_acceptance.py --python PATH ...     (any interpreter with torch)

The training stage's preflight (training/preflight.py), run by a person: the same measurement
(ab_runtime/host_acceptance.py in that interpreter), the same judgement, and the same record on the
board for this host and stack, so a job that follows reads it instead of measuring again. A record
already on the board is shown, not measured again, unless `--fresh`. Exit 0 accepted, 1 a figure
below its expectation (or the measurement failed), 2 bad input.
"""

from __future__ import annotations

import json
import socket
import sys

from ascendbridge.board.store import BoardStore
from ascendbridge.cli.interpreter import add_interpreter, chosen_interpreter
from ascendbridge.cli_errors import EXIT_FAILURE, CliError, OneLineParser, run_guarded
from ascendbridge.config import board_path
from ascendbridge.gatekit.envs import model_run_env
from ascendbridge.hostcheck.judge import BELOW, DEFAULT_MIN_RATIO, summary
from ascendbridge.package.stack import StackError, probe_stack
from ascendbridge.stack_identity import stack_id
from ascendbridge.workers.process import run_command
from training.preflight import MEASURE_TIMEOUT_S, MeasureError, accept, measure_command, measurement_of, table_lines


def main(argv: list[str]) -> int:
    return run_guarded(lambda: _run(argv))


def _run(argv: list[str]) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    add_interpreter(parser)
    parser.add_argument("--budget-s", type=float, default=1.0, help="timed seconds per figure")
    parser.add_argument("--allreduce", action="store_true", help="also all-reduce bus bandwidth over the devices")
    parser.add_argument("--min-ratio", type=float, default=DEFAULT_MIN_RATIO, help="warning below this x expected")
    parser.add_argument("--fresh", action="store_true", help="measure again even if the board has this host and stack")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    chosen = chosen_interpreter(args)  # the input first: a bad --adapt or --python is refused before anything runs
    assert chosen is not None  # the parser requires one of them
    python, cwd = chosen
    try:
        sid = stack_id(probe_stack(python))
    except StackError as exc:
        raise CliError(f"the stack of {python}: {exc}", EXIT_FAILURE) from None
    argv_measure = [str(python), *measure_command(args.device, args.budget_s, args.allreduce)]
    host = socket.gethostname()
    with BoardStore(board_path()) as store:
        try:
            judged, record = accept(
                store.host_acceptances(host),
                host,
                sid,
                lambda: measurement_of(
                    run_command(argv_measure, cwd=cwd, env=model_run_env(), timeout_s=MEASURE_TIMEOUT_S)
                ),
                args.min_ratio,
                fresh=args.fresh,
            )
        except MeasureError as exc:
            raise CliError(f"the measurement failed: {exc}", EXIT_FAILURE) from None
        if record is not None:
            store.record_host_acceptance(record, f"{host}: {summary(judged)}")
    print(json.dumps(judged, indent=1, sort_keys=True) if args.json else "\n".join(table_lines(judged)))
    print(f"host {host}, stack {sid}: {'measured now' if record else 'the board record'}", file=sys.stderr)
    return EXIT_FAILURE if judged["verdict"] == BELOW else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
