"""Retrying a board call while another writer holds the lock: a busy board never kills a process.

SQLite already waits `busy_timeout` for the lock inside one statement; a `BoardBusyError` means
it waited that long in vain. Callers that must not lose what they record (the team lead's
verdicts) retry with exponential backoff and log each wait.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from ascendbridge.board import BoardBusyError

T = TypeVar("T")
FIRST_WAIT_S = 0.2
LONGEST_WAIT_S = 5.0


def retry_busy(
    call: Callable[[], T],
    what: str,
    say: Callable[[str], None],
    give_up_after_s: float | None = None,
    stop: threading.Event | None = None,
) -> T:
    """`call()` until it does not raise BoardBusyError; waits 0.2 s, 0.4 s, ... up to 5 s between
    tries. Re-raises the last error after `give_up_after_s` (None: never) or once `stop` is set."""
    wait, began = FIRST_WAIT_S, time.monotonic()
    while True:
        try:
            return call()
        except BoardBusyError as exc:
            spent = time.monotonic() - began
            if (give_up_after_s is not None and spent >= give_up_after_s) or (stop is not None and stop.is_set()):
                raise
            say(f"board busy during {what} ({spent:.1f} s so far), retrying in {wait:.1f} s: {exc}")
            time.sleep(wait)
            wait = min(wait * 2, LONGEST_WAIT_S)
