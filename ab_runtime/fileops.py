"""sha256 of a file and atomic file writes: the one implementation of each.

Standard library only: code inside adaptations imports it as `ab_runtime.fileops`, the framework
as `ab_runtime.fileops`, and the gates' inner scripts load the framework's copy
by path, so every writer and every checker use the same code.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks (outputs files can be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextmanager
def atomic_path(path: Path, durable: bool = True) -> Iterator[Path]:
    """A fresh temporary path beside `path` to write (any way: text, bytes, torch.save); when the
    block succeeds it is flushed to disk, renamed over `path` and the directory synced, so a reader,
    a concurrent writer or a crash leaves the old file or the whole new one, never half of one. The
    temporary name is unique (two writers of one path never share it) and removed on failure.
    `durable=False` skips the syncs (a reader still never sees half a file; a crash may lose it):
    for files rewritten often that nothing needs after a crash, like a progress heartbeat."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")  # created by the block: the umask's mode
    try:
        yield tmp
        if durable:
            _fsync(tmp, os.O_RDONLY)
        os.replace(tmp, path)
        if durable:
            _fsync(path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))  # the rename itself survives a crash
    finally:
        tmp.unlink(missing_ok=True)


def _fsync(path: Path, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text_atomic(path: Path, text: str, durable: bool = True) -> None:
    with atomic_path(path, durable) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_bytes_atomic(path: Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
