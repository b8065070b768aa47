"""Shared by the board and team-lead hostile tests: a small tmpfs of a test's own, to fill up."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_tmpfs(mnt: Path, size: str) -> Iterator[Path]:
    """Mount a tmpfs of `size` (mount's notation, e.g. 2m) at mnt, or skip where mounting is not allowed."""
    mnt.mkdir()
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], check=True, capture_output=True
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount a small tmpfs here: {getattr(exc, 'stderr', b'') or exc}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
