"""A folder seen read-only through a bind mount: root ignores file modes, a read-only mount it
cannot. Tests that need one skip where mounting is not allowed."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def read_only_view(real: Path, view: Path) -> Iterator[Path]:
    """`view` (an empty folder) showing `real` read-only, unmounted on exit."""
    try:
        subprocess.run(["mount", "--bind", str(real), str(view)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot bind-mount here: {getattr(exc, 'stderr', b'') or exc}")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(view)], check=True, capture_output=True)
        yield view
    finally:
        subprocess.run(["umount", str(view)], check=False)
