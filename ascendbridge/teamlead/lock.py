"""Single-instance lock per board: one team lead schedules a board at a time.

An flock on a file next to the board: the kernel drops it when the holder dies (even SIGKILL),
so a crashed team lead never leaves a stale lock behind. Worker subprocesses do not inherit it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class LockHeld(Exception):
    """Another team lead holds the lock (its pid, when it wrote one)."""

    def __init__(self, path: Path, pid: int | None) -> None:
        super().__init__(
            f"another team lead{f' (pid {pid})' if pid else ''} is already running on this board (lock {path})"
        )
        self.pid = pid


def lock_path_for(board: Path) -> Path:
    return board.with_name(board.name + "-teamlead.lock")


class InstanceLock:
    def __init__(self, board: Path) -> None:
        self.path = lock_path_for(board)
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raw = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise LockHeld(self.path, int(raw) if raw.isdigit() else None) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None
