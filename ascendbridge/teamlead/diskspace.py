"""Free space where the team lead and its attempts write: the board's directory, adaptations, logs.

A full disk is an expected condition, not a crash: SQLite answers "database or disk is full" in
the middle of a verdict, workers die on their heartbeat, logs stop. So the team lead looks before
it dispatches (every tick): below the threshold it starts nothing more, stops its running
attempts (their tasks go back to pending, their attempts are closed as released, with the
workers' exit codes) while there is still room to record that, and exits 3 with one line.
"""

from __future__ import annotations

import os
from pathlib import Path

from ascendbridge.settings import GeneralSettings, section

MIN_FREE_ENV = "ASCENDBRIDGE_MIN_FREE_MB"  # general.min_free_mb (ascendbridge.settings); named in messages
MiB = 1024 * 1024


def min_free_bytes() -> int:
    """The threshold: general.min_free_mb (MiB, >= 0; 0 turns the check off), 256 MiB by default.
    A bad value is a SettingsError (one line, exit 2)."""
    return int(section(GeneralSettings).min_free_mb * MiB)


def free_bytes(path: Path) -> int:
    """Free bytes for an unprivileged writer on the file system holding `path` (or, when it does
    not exist yet, its nearest existing parent)."""
    for candidate in (path, *path.parents):
        try:
            st = os.statvfs(candidate)
        except OSError:
            continue
        return st.f_bavail * st.f_frsize
    return 0


def shortage(places: dict[str, Path], need: int) -> str | None:
    """One line naming the first place with less than `need` bytes free, or None."""
    if need <= 0:
        return None
    for what, path in places.items():
        free = free_bytes(path)
        if free < need:
            return (
                f"only {free / MiB:.1f} MiB free for {what} ({path}), below {MIN_FREE_ENV}={need / MiB:g}: "
                "nothing more dispatched; free space and start the team lead again"
            )
    return None
