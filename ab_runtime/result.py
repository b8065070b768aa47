"""The RESULT line every runtime script ends with, written and read by this one module.

A model run (demo.py, accuracy_run.py, accuracy_run_perf.py, business_run.py, the optimizer)
prints readable progress, then, last, `ASCENDBRIDGE_RESULT {json}`: the gates parse that line and
never free text. `run_main` is the one `main()` of those scripts: the RESULT line is printed
whatever happens, an expected failure is one `error:` line (exit 1, or 2 for bad input), anything
else keeps its traceback for the healer. Standard library only: the framework imports this file
(the reader and the marker) from the same copy every adaptation ships.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from typing import Any

from . import phases

RESULT_MARKER = "ASCENDBRIDGE_RESULT "
EXIT_FAILED = 1  # the run failed (expected diagnosis, or the model code raised)
EXIT_BAD_INPUT = 2  # a bad flag, set or value: nothing a retry of the same input changes

Result = dict[str, Any]


def first_line(exc: BaseException) -> str:
    """The exception's message, first line only (the RESULT's `error` is one line)."""
    text = str(exc)
    return text.splitlines()[0] if text else ""


def emit_result(result: Result) -> None:
    """Print the RESULT line (always the script's last line), with the process's `phases`
    (ab_runtime/phases.py) when it recorded any: how its caller learns where the run's time went."""
    spent = phases.snapshot()
    if spent and "phases" not in result:
        result = {**result, "phases": spent}
    print(RESULT_MARKER + json.dumps(result, sort_keys=True, default=str), flush=True)


def read_result(output: str) -> Result | None:
    """The JSON object of the last RESULT line of a run's output, or None when there is none."""
    for line in reversed(output.splitlines()):
        if line.startswith(RESULT_MARKER):
            try:
                value = json.loads(line[len(RESULT_MARKER) :])
            except json.JSONDecodeError:
                return None
            return value if isinstance(value, dict) else None
    return None


def run_main(
    run: Callable[[], Result],
    exit_code: Callable[[Result], int] = lambda result: 0,
    failures: tuple[type[BaseException], ...] = (),
    bad_input: tuple[type[BaseException], ...] = (),
    on_failure: Callable[[BaseException, Result], None] | None = None,
) -> int:
    """Run a script's body and print its RESULT line last; return its exit code.

    `exit_code(result)` for a finished run; an exception in `bad_input` exits 2 and one in
    `failures` exits 1, both as one `error:` line (`on_failure` may add to the result); any other
    exception is the model code's failure: its traceback is printed for the healer, exit 1.
    argparse's own exit (bad flags, exit 2) passes through.
    """
    phases.process_started()
    result: Result = {"ok": False, "error": None}
    try:
        result = run()
        code = exit_code(result)
    except SystemExit:
        raise
    except bad_input + failures as exc:
        print(f"error: {exc}", file=sys.stderr)
        result["error"] = first_line(exc) or type(exc).__name__
        code = EXIT_BAD_INPUT if isinstance(exc, bad_input) else EXIT_FAILED
        if on_failure is not None:
            on_failure(exc, result)
    except Exception as exc:  # model code failed: keep the traceback for the healer
        traceback.print_exc()
        result["error"], code = f"{type(exc).__name__}: {first_line(exc)}", EXIT_FAILED
    emit_result(result)
    return code
