"""Every expected failure leaves a CLI as one `error:` line on stderr and a documented exit code.

Exit codes: 0 success, 1 the operation failed (board missing or unusable, refused state change,
I/O), 2 the input was wrong (arguments, model ids, stage/status names, unknown models, files).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

from sqlalchemy.exc import SQLAlchemyError

from ascendbridge.board import BoardError, InvalidRegistrationError, UnknownModelError
from ascendbridge.naming import InvalidModelIdError
from ascendbridge.settings import GeneralSettings, section
from ascendbridge.stages import UnknownNameError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

# Raised by the store for input the user typed wrong (as opposed to a refused state change).
INPUT_ERRORS: tuple[type[BaseException], ...] = (
    UnknownModelError,
    InvalidRegistrationError,
    InvalidModelIdError,
    UnknownNameError,
)


class CliError(Exception):
    """A failure the command already phrased for the user."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def _debug() -> bool:
    """ASCENDBRIDGE_DEBUG (general settings); a bad value there is no reason to hide the traceback."""
    try:
        return section(GeneralSettings).debug
    except ValueError:
        return True


def emit_error(message: str) -> None:
    """Print one line, whatever the message contains (SQLite and OS messages can be multi-line)."""
    flat = " ".join(str(message).split())
    sys.stderr.write(f"error: {flat}\n")
    sys.stderr.flush()


class OneLineParser(argparse.ArgumentParser):
    """The argument parser of every CLI: a usage mistake is one `error:` line and exit 2 (inside
    run_guarded or not), not argparse's usage text plus a line."""

    def error(self, message: str) -> NoReturn:
        emit_error(f"{message} (see: {self.prog} --help)")
        sys.exit(EXIT_USAGE)


def run_guarded(command: Callable[[], int]) -> int:
    """Run a command and map every expected exception to (one line, exit code)."""
    try:
        return command()
    except CliError as exc:
        emit_error(str(exc))
        return exc.code
    except INPUT_ERRORS as exc:
        emit_error(str(exc))
        return EXIT_USAGE
    except BoardError as exc:
        emit_error(str(exc))
        return EXIT_FAILURE
    except SQLAlchemyError as exc:
        emit_error(f"board: {getattr(exc, 'orig', None) or exc}")
        return EXIT_FAILURE
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        emit_error(f"{exc.strerror or exc}{where}")
        return EXIT_FAILURE
    except KeyboardInterrupt:
        emit_error("interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug: still one line, the traceback only on request
        if _debug():
            traceback.print_exc()
        emit_error(f"internal error: {type(exc).__name__}: {exc} (set ASCENDBRIDGE_DEBUG=1 for details)")
        return EXIT_FAILURE


def run_cli(
    argv: Sequence[str], parser: argparse.ArgumentParser, input_errors: tuple[type[Exception], ...] = ()
) -> int:
    """A whole CLI: parse `argv`, run the command the parser chose (`set_defaults(run=FUNCTION)`,
    FUNCTION(args) -> exit code) under run_guarded; an exception in `input_errors` is bad input
    (one line, exit 2)."""

    def command() -> int:
        args = parser.parse_args(list(argv))
        try:
            return int(args.run(args))
        except input_errors as exc:
            raise CliError(str(exc)) from None

    return run_guarded(command)
