"""Registration files for `register_many`: plain text or JSON Lines, validated line by line.

Text: one model id per line. JSONL: one object per line with the `register_model` fields. Both
allow blank lines and `#` comments, and may be mixed. The whole file is checked before anything is
registered, so a bad line (reported with its number) registers nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ab_runtime.train.corpus import HUB_PREFIX
from ascendbridge import capped_read
from ascendbridge.board import BoardError, Registration, validate_registration

FIELDS = frozenset(Registration.model_fields)
PSEUDO_FILE_SYSTEMS = (Path("/proc"), Path("/sys"), Path("/dev"))  # kernel views, never a model's files


class RegistrationFileError(ValueError):
    """A registration file that cannot be used; the message names the file and line."""


def _from_json(raw: str, base_dir: Path) -> Registration:
    try:
        data: Any = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(data, dict):
        raise ValueError("a JSON line must be an object")
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)} (allowed: {', '.join(sorted(FIELDS))})")
    if "model_id" not in data:
        raise ValueError("missing field model_id")
    try:
        reg = Registration.model_validate(data, strict=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "line"
        raise ValueError(f"field {where}: {first['msg']}") from exc
    if reg.path:  # relative paths are relative to the file, so a file can travel with its models
        reg.path = model_path(reg.path, base_dir, reg.source)
    if reg.training is not None and not reg.training.data.startswith(HUB_PREFIX):  # so is a training job's corpus file
        data = (base_dir / reg.training.data).resolve()
        if not data.is_file():
            raise ValueError(f"training data {data} is not a file")
        reg.training = reg.training.model_copy(update={"data": str(data)})
    return reg


def model_path(raw: str, base_dir: Path, source: str) -> str:
    """The absolute form of a model path (relative to `base_dir`), checked now because the board
    is read from other working directories and a mistake would only surface at discovery: a
    readable directory outside /proc, /sys and /dev, holding a config.json for source 'local'
    (for 'hf-cache' it is the cache directory). ValueError says what it is instead."""
    resolved = (base_dir / Path(raw).expanduser()).resolve()
    if not resolved.exists():
        raise ValueError(f"path {resolved} does not exist")
    if any(resolved == root or root in resolved.parents for root in PSEUDO_FILE_SYSTEMS):
        raise ValueError(f"path {resolved} is a kernel file system, not a model directory")
    if not resolved.is_dir():
        raise ValueError(f"path {resolved} is not a directory")
    if not os.access(resolved, os.R_OK | os.X_OK):
        raise ValueError(f"path {resolved} is not readable")
    if source == "local" and not (resolved / "config.json").is_file():
        raise ValueError(f"path {resolved} has no config.json (not a Hugging Face model directory)")
    return str(resolved)


def parse_registration_file(path: Path) -> list[Registration]:
    """Every registration in the file, or RegistrationFileError naming the first bad line."""
    try:
        text = capped_read.read_text(path, capped_read.LIST_MAX_BYTES)
    except capped_read.FileTooLargeError as exc:
        raise RegistrationFileError(f"registration file {exc.strerror}") from None
    except FileNotFoundError:
        raise RegistrationFileError(f"registration file {path} does not exist") from None
    except IsADirectoryError:
        raise RegistrationFileError(f"registration file {path} is a directory") from None
    except UnicodeDecodeError:
        raise RegistrationFileError(f"registration file {path} is not UTF-8 text") from None
    except OSError as exc:
        raise RegistrationFileError(f"cannot read registration file {path}: {exc.strerror}") from None
    base_dir = path.resolve().parent
    regs: list[Registration] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            if stripped.startswith("{"):
                reg = _from_json(stripped, base_dir)
            else:  # a bare id; '#' cannot occur in an id, so the rest is a comment
                reg = Registration(model_id=stripped.split("#", 1)[0].strip())
            validate_registration(reg)
        except (ValueError, BoardError) as exc:
            raise RegistrationFileError(f"{path} line {number}: {exc}") from None
        regs.append(reg)
    if not regs:
        raise RegistrationFileError(f"registration file {path} lists no models")
    return regs
