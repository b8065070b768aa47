"""Reading a file that a user, a model repository or a stage wrote: never more than a cap.

A model directory, a registration list or an evidence file can be anything: `/dev/zero`, an
8 GB sparse `config.json`, a pipe that never ends. Reading it whole ends in a MemoryError (and
a crash the team lead retries). Every such read goes through `read_bytes` / `read_text` here:
a regular file larger than its cap is refused from its size, before a byte is read; anything
else is read up to the cap plus one byte and refused there. The refusal is an OSError (EFBIG)
whose message is one line, so the callers' existing `except OSError` turn it into their own
one-line error.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

MiB = 1024 * 1024
CONFIG_MAX_BYTES = 16 * MiB  # config.json, modules.json, a pooling config, a safetensors index, a card
LIST_MAX_BYTES = 64 * MiB  # a registration file or a model list (a million ids is ~50 MiB)
EVIDENCE_MAX_BYTES = 16 * MiB  # a stage's evidence or result file
# A tokenizer file (tokenizer.json, a vocabulary, a SentencePiece model): the largest real ones are
# tens of MiB. transformers reads them whole inside the package's runs, so discovery refuses a model
# whose listed tokenizer file is larger, from its size alone.
TOKENIZER_MAX_BYTES = 512 * MiB


class FileTooLargeError(OSError):
    """A file over its cap; `strerror` is the one-line reason."""


def _refuse(path: Path, limit: int, size: str) -> FileTooLargeError:
    return FileTooLargeError(errno.EFBIG, f"{path} {size} the {_human(limit)} limit for this file; not read", str(path))


def _human(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB and n % MiB == 0 else f"{n} bytes"


def read_bytes(path: str | os.PathLike[str], limit: int) -> bytes:
    """The file's bytes, or FileTooLargeError when it holds more than `limit` (checked from its
    size when it is a regular file, else by reading at most `limit` + 1 bytes)."""
    path = Path(path)
    with path.open("rb") as fh:
        info = os.fstat(fh.fileno())
        if stat.S_ISREG(info.st_mode) and info.st_size > limit:
            raise _refuse(path, limit, f"is {info.st_size} bytes, over")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise _refuse(path, limit, "holds more than")
    return data


def read_text(path: str | os.PathLike[str], limit: int) -> str:
    """`read_bytes` decoded as UTF-8 (UnicodeDecodeError when it is not)."""
    return read_bytes(path, limit).decode("utf-8")


def json_object(path: str | os.PathLike[str], limit: int) -> dict[str, Any] | None:
    """A JSON object file read within `limit`, or None when it is missing, unreadable, too large,
    not JSON or not an object: for the dashboard's and the summaries' optional evidence files."""
    try:
        data = json.loads(read_text(path, limit))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
