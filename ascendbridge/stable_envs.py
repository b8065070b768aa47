"""Stable environments: one per lock and stack, at a per-host path shared by every package and attempt.

Why: every package had its own `.venv` and every attempt its own staging copy of it, so each run's
interpreter lived at another path, and inductor's C++ kernel cache (keyed by a compile command
that names the environment's include paths) was cold in every search. Here a package's locked
environment lives at `<root>/<key>-<profile>`, where `key` hashes the package's `uv.lock` with
the project's own name taken out (two packages that resolve to the same packages share one
environment), its `.python-version` and the mode. Beside each environment, `<env>.lock` serializes
syncs (a file lock) and `<env>.installing` marks a sync that has not finished: such an environment
is never used, the next sync completes it. A package directory's own `.venv` (a user's `uv run`,
a test's stand-in) always wins over the stable one; team-lead attempts never have one.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, TypeVar

from ascendbridge.settings import EnvsSettings, section

FORMAT = "1"  # bump when what an environment holds for a key changes
LOCK_SUFFIX = ".lock"
INSTALLING_SUFFIX = ".installing"
USED_SUFFIX = ".used"  # touched at each sync or reuse: what pruning goes by
_NAME = re.compile(r'^name = "([^"]+)"', re.MULTILINE)


class _Result(Protocol):
    @property
    def ok(self) -> bool: ...


R = TypeVar("R", bound=_Result)


def _cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ascendbridge"


def _setting_path(value: str, default: str) -> Path | None:
    if value.strip().lower() in ("", "none"):
        return None
    return _cache_home() / default if value == "auto" else Path(value).expanduser()


def root() -> Path | None:
    """ASCENDBRIDGE_STABLE_ENVS: `auto` = $XDG_CACHE_HOME/ascendbridge/envs (~/.cache without it),
    `none` = every package syncs its own `.venv` (the behaviour before stable environments)."""
    return _setting_path(section(EnvsSettings).stable_envs, "envs")


def kernel_cache_env() -> dict[str, str]:
    """TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR at ASCENDBRIDGE_KERNEL_CACHE (`auto` =
    $XDG_CACHE_HOME/ascendbridge/kernels), so compiled kernels outlive attempts and /tmp; a value
    already in this process's environment (a person's, a test's) is kept."""
    base = _setting_path(section(EnvsSettings).kernel_cache, "kernels")
    if base is None:
        return {}
    wanted = {"TORCHINDUCTOR_CACHE_DIR": base / "inductor", "TRITON_CACHE_DIR": base / "triton"}
    return {name: str(path) for name, path in wanted.items() if name not in os.environ}


def lock_key(directory: Path) -> str | None:
    """The content address of a package's locked environment (None without a uv.lock): the lock
    with the project's own name replaced (uv writes it into its entry and into every extra's
    marker), plus `.python-version` and the mode."""
    directory = Path(directory)
    lock = directory / "uv.lock"
    if not lock.is_file():
        return None
    text = lock.read_text()
    found = _NAME.search((directory / "pyproject.toml").read_text())
    if found:
        name = found.group(1)
        text = text.replace(f"extra-{len(name)}-{name}-", "extra-@-").replace(f'"{name}"', '"@"')
    pin = directory / ".python-version"
    parts = (FORMAT, "locked", pin.read_text().strip() if pin.is_file() else "", text)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def env_dir(directory: Path, profile: str) -> Path | None:
    """Where the package's `profile` environment lives; None when stable environments are off or
    the package has no lock."""
    base, key = root(), lock_key(directory)
    return None if base is None or key is None else base / f"{key}-{profile}"


def ready(env: Path) -> bool:
    """An environment whose sync finished (an interrupted one may have its interpreter already)."""
    return (env / "bin" / "python").is_file() and not _beside(env, INSTALLING_SUFFIX).exists()


def _beside(env: Path, suffix: str) -> Path:
    return env.with_name(env.name + suffix)


@contextmanager
def _locked(env: Path, blocking: bool = True) -> Iterator[bool]:
    env.parent.mkdir(parents=True, exist_ok=True)
    with open(_beside(env, LOCK_SUFFIX), "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True


def ensure(env: Path, sync: Callable[[], R]) -> R | None:
    """Make `env` ready with `sync` unless it already is (None: reused, nothing ran). One sync of
    an environment at a time (its file lock); the marker stays when the sync fails or is killed."""
    with _locked(env):
        _beside(env, USED_SUFFIX).touch()
        if ready(env):
            return None
        _beside(env, INSTALLING_SUFFIX).touch()
        result = sync()
        if result.ok:
            _beside(env, INSTALLING_SUFFIX).unlink()
        return result


def python(directory: Path) -> Path:
    """The interpreter a package's runs use: its own `.venv`'s when it has one, else that of the
    ready stable environment of its lock (the most recently used profile; a host has one), else
    the `.venv` path (absent: the caller reports the missing environment)."""
    env = stable_env(directory)
    return (env if env is not None else Path(directory) / ".venv") / "bin" / "python"


def stable_env(directory: Path) -> Path | None:
    """The ready stable environment a package without its own `.venv` runs in (None: none)."""
    base, key = root(), lock_key(directory)
    if base is None or key is None or (Path(directory) / ".venv").exists() or not base.is_dir():
        return None
    found = [env for env in base.glob(f"{key}-*") if env.is_dir() and ready(env)]
    return max(found, key=lambda env: _used(env), default=None)


def project_env(directory: Path) -> dict[str, str]:
    """What a `uv run --no-sync` in the package needs to run in its stable environment (nothing when
    it has its own `.venv` or none is ready): uv's UV_PROJECT_ENVIRONMENT."""
    env = stable_env(directory)
    return {"UV_PROJECT_ENVIRONMENT": str(env)} if env is not None else {}


def _used(env: Path) -> float:
    stamp = _beside(env, USED_SUFFIX)
    return stamp.stat().st_mtime if stamp.exists() else 0.0


def prune(older_than_days: float, dry_run: bool = False) -> list[Path]:
    """Remove the stable environments not synced or reused for `older_than_days` (one in use by
    a sync right now is skipped); returns what was (or, dry, would be) removed."""
    base = root()
    if base is None or not base.is_dir():
        return []
    cutoff = time.time() - older_than_days * 86400
    removed = []
    for env in sorted(p for p in base.iterdir() if p.is_dir() and _used(p) < cutoff):
        with _locked(env, blocking=False) as held:
            if not held:
                continue
            removed.append(env)
            if not dry_run:
                shutil.rmtree(env, ignore_errors=True)
                for suffix in (INSTALLING_SUFFIX, USED_SUFFIX):
                    _beside(env, suffix).unlink(missing_ok=True)
    return removed
