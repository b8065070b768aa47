"""The agent's workspace: a throw-away copy of one adaptation directory, and the audit of what
the agent changed.

The agent runs in `<tmp>/<name>/` (`<tmp>` inside the attempt's root when the directory is a
staging copy, so it is discarded with the attempt even after a SIGKILL). Afterwards every change is classified: inside the copy
(allowed, candidates for the gate) or outside it (anything new in the workspace root, any
change to the real adaptation directory, a symlink in the copy pointing out of it, or a path the
backend itself refused). Outside edits to the real directory are undone from a pristine copy
taken before the run, swapped in atomically. Build outputs (.venv, caches) are neither copied
nor audited.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ab_runtime.fileops import sha256_file
from ascendbridge.workers.attempt_dir import attempt_scratch, replace_dir

IGNORED = frozenset({".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"})


def _ignore(_dir: str, names: list[str]) -> list[str]:
    return [n for n in names if n in IGNORED]


def snapshot(root: Path) -> dict[str, str]:
    """relative path -> content digest (or link target) of every file under `root`."""
    state: dict[str, str] = {}
    if not root.is_dir():
        return state
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in IGNORED]
        base = Path(dirpath)
        for name in filenames + [d for d in dirnames if (base / d).is_symlink()]:
            path = base / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                state[rel] = "link:" + os.readlink(path)
            else:
                state[rel] = sha256_file(path)
    return state


def changed_paths(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def inside(root: Path, relative: str) -> bool:
    """Whether `relative` names a path inside `root` (no absolute paths, no escaping `..`)."""
    if not relative or os.path.isabs(relative):
        return False
    target = (root / relative).resolve()
    return target == root.resolve() or root.resolve() in target.parents


def write_inside(root: Path, relative: str, text: str) -> bool:
    """Write a file for a backend that cannot edit by itself; refuse (False) outside `root`."""
    if not inside(root, relative):
        return False
    target = root / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return True


@dataclass
class Audit:
    changed: list[str] = field(default_factory=list)  # relative paths inside the copy
    outside: list[str] = field(default_factory=list)  # what the agent touched outside it


class Workspace:
    """Create with `Workspace(directory, seed)`, run the agent in `.copy`, then `audit()`, and
    finally `close()` (which undoes outside edits to the real directory when asked to)."""

    def __init__(self, directory: Path, seed: dict[str, str] | None = None) -> None:
        self.original = Path(directory).resolve()
        scratch = attempt_scratch(self.original)  # in the attempt: a killed team lead leaks nothing
        self.root = Path(tempfile.mkdtemp(prefix="ab-agent-", dir=scratch))
        self.copy = self.root / self.original.name
        self._pristine = Path(tempfile.mkdtemp(prefix="ab-agent-pristine-", dir=scratch)) / self.original.name
        if self.original.is_dir():
            shutil.copytree(self.original, self.copy, symlinks=True, ignore=_ignore)
            shutil.copytree(self.original, self._pristine, symlinks=True, ignore=_ignore)
        else:
            self.copy.mkdir(parents=True)
        for relative, text in (seed or {}).items():  # e.g. a draft spec for a new adaptation
            if not write_inside(self.copy, relative, text):
                raise ValueError(f"seed file {relative!r} lies outside the workspace")
        self._before_copy = snapshot(self.copy)
        self._before_original = snapshot(self.original)

    def audit(self, refused: list[str] | None = None) -> Audit:
        audit = Audit(changed=changed_paths(self._before_copy, snapshot(self.copy)))
        audit.outside += [f"{self.root}/{p.name}" for p in sorted(self.root.iterdir()) if p.name != self.copy.name]
        audit.outside += [str(self.original / p) for p in changed_paths(self._before_original, snapshot(self.original))]
        for rel in audit.changed:
            path = self.copy / rel
            if path.is_symlink() and not inside(self.copy, os.path.relpath(path.resolve(), self.copy)):
                audit.outside.append(f"{rel} -> {os.readlink(path)}")
        audit.outside += [f"refused: {p}" for p in refused or []]
        return audit

    def apply_to_original(self, changed: list[str]) -> None:
        """Copy the accepted changes (and deletions) from the copy into the real directory."""
        for rel in changed:
            source, target = self.copy / rel, self.original / rel
            if source.exists() or source.is_symlink():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target, follow_symlinks=False)
            elif target.exists():
                target.unlink()

    def restore_original(self) -> None:
        """Undo whatever happened to the real directory during the run (outside edits).

        The pristine state is rebuilt beside it and swapped in with one rename, so a crash at any
        moment leaves either the edited or the restored directory, never an empty or half-copied
        one. Build outputs (.venv, caches) are kept: hard-linked into the restored copy."""
        if snapshot(self.original) == self._before_original:
            return
        restored = self.original.with_name(f".{self.original.name}.restore-{os.getpid()}")
        shutil.rmtree(restored, ignore_errors=True)
        if self._pristine.exists():
            shutil.copytree(self._pristine, restored, symlinks=True)
        else:
            restored.mkdir()
        for name in IGNORED:
            kept = self.original / name
            if kept.is_dir() and not kept.is_symlink():
                shutil.copytree(kept, restored / name, symlinks=True, copy_function=os.link)
        replace_dir(restored, self.original)
        shutil.rmtree(restored, ignore_errors=True)  # now the edited state

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self._pristine.parent, ignore_errors=True)
