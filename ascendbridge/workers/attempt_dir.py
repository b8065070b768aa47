"""Attempt directories: an attempt works on a staging copy; only a gated result replaces the real one.

`adaptations/<name>/` always holds the last gated state. Each attempt gets
`adaptations/.attempts/<name>.<stage>.<token>/<name>/` (same file system, same base name, so uv projects
and `resolve_adaptation` see the directory they expect), a copy of the real directory in which
the run and the gate work. When the gate passes, the team lead swaps the copy in with one
`renameat2(RENAME_EXCHANGE)`: at no moment is `adaptations/<name>/` missing, empty or
half-copied. An orphaned process of a stale attempt can only write into its own copy, which is
deleted with the attempt.

A package's own `.venv` (a person's `uv run` in `adaptations/<name>/`) is left out of the copy:
an attempt runs in the stable environment of the package's lock (ascendbridge/stable_envs.py),
whose path is the same for every attempt, so inductor's kernel cache, keyed by compile commands
that name the environment, stays warm. Promotion hands that `.venv` back to the live directory.
A system-mode `.venv` (one interpreter's layer, the package's own by design) is hard-linked in.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
from pathlib import Path
from typing import Any

from ascendbridge.envmode import SYSTEM_MARKER

STAGING_ROOT = ".attempts"
LINKED = ".venv"  # a package's own environment: part of an attempt only in system mode (never of a Ray artefact)
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def staging_dir(live: Path, stage: str, token: int) -> Path:
    return live.parent / STAGING_ROOT / f"{live.name}.{stage}.{token}" / live.name


def _attempt_root(staging: Path) -> Path:
    return staging.parent


def attempt_scratch(directory: Path) -> Path | None:
    """The attempt root owning a staging copy (None for any other directory): scratch files
    made there are discarded with the attempt, even when the process that made them is killed."""
    root = directory.parent
    return root if root.parent.name == STAGING_ROOT and root.name.startswith(directory.name + ".") else None


def copy_tree(source: Path, target: Path) -> None:
    """Copy `source` to the new directory `target`, without its own top-level `.venv`, except a
    system-mode one: that is the package's environment by design (layered on one interpreter,
    ascendbridge/package/system_env.py), and its files are hard-linked, not copied (its writers
    replace files instead of writing into them), so it costs directory entries, not a re-make."""
    venv = source / LINKED
    system = (venv / SYSTEM_MARKER).is_file()

    def ignore(directory: str, names: list[str]) -> list[str]:
        return [LINKED] if Path(directory) == source and LINKED in names and not system else []

    def copy(src: str, dst: str) -> Any:
        if Path(src).is_relative_to(venv):
            try:
                os.link(src, dst, follow_symlinks=False)
                return dst
            except OSError:
                pass
        return shutil.copy2(src, dst, follow_symlinks=False)

    shutil.copytree(source, target, symlinks=True, ignore=ignore, copy_function=copy)


def prepare(live: Path, stage: str, token: int) -> Path:
    """A fresh staging copy of `live` (an empty directory when `live` does not exist yet)."""
    staging = staging_dir(live, stage, token)
    discard(staging)
    staging.parent.mkdir(parents=True)
    if live.is_dir():
        copy_tree(live, staging)
    else:
        staging.mkdir()
    return staging


def exchange(a: Path, b: Path) -> bool:
    """Swap two directories atomically; False when the kernel or file system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, f"cannot swap {a} and {b}: {os.strerror(err)}")


def replace_dir(new: Path, live: Path) -> None:
    """Make `new` the content of `live` in one step; `new` then holds the previous content (or is
    gone when `live` did not exist). Without RENAME_EXCHANGE, two renames: `live` is briefly
    absent, but never half-written."""
    if not live.exists():
        os.rename(new, live)
        return
    if exchange(new, live):
        return
    aside = new.with_name(new.name + ".previous")
    os.rename(live, aside)
    os.rename(new, live)
    os.rename(aside, new)


def promote(staging: Path, live: Path) -> None:
    """Put a gated attempt's directory in place of the real one; drop the previous state. An
    attempt that made nothing (discovery, or a stage refused before writing) where there was
    nothing creates no empty `adaptations/<name>/`."""
    if not live.exists() and not any(staging.iterdir()):
        discard(staging)
        return
    own = live / LINKED
    if (own.exists() or own.is_symlink()) and not (staging / LINKED).exists():
        os.rename(own, staging / LINKED)  # the person's environment stays with the package
    live.parent.mkdir(parents=True, exist_ok=True)
    replace_dir(staging, live)
    discard(staging)


def discard(staging: Path) -> None:
    shutil.rmtree(_attempt_root(staging), ignore_errors=True)


def discard_all(adaptations: Path, names: set[str]) -> list[Path]:
    """Remove the staging copies of these adaptations (a restarted team lead: their attempts are
    dead); returns what was removed."""
    root = adaptations / STAGING_ROOT
    removed = []
    for attempt in sorted(root.iterdir()) if root.is_dir() else []:
        if any((attempt / name).exists() for name in names):
            shutil.rmtree(attempt, ignore_errors=True)
            removed.append(attempt)
    return removed


def relocate(data: Any, staging: Path, live: Path) -> Any:
    """Paths inside a result that point into the staging copy, pointing at the promoted directory."""
    if isinstance(data, str):
        return data.replace(str(staging), str(live))
    if isinstance(data, dict):
        return {k: relocate(v, staging, live) for k, v in data.items()}
    if isinstance(data, list):
        return [relocate(v, staging, live) for v in data]
    return data
