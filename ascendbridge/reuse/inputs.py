"""What one stage of one model read, as digests: the fingerprint the team lead records when the stage
completes and the main job recomputes on its next pass.

Parts (each a sha256 of its own inputs, so a changed fingerprint says which part changed):
- `registration`: the model's registered fields (id, source, path, revision, remote code, skipped and
  opted-in stages, training job, environment mode), never what discovery filled in;
- `model_files`: every file under the model's local path (its bytes; size and mtime for a file over
  16 MiB) and the training job's data file; a Hub model its pinned revision (`UNPINNED` without one:
  never reused, since the Hub may have moved);
- `code`: the stage's package, the kernel (`ascendbridge/`), the runtime every package ships
  (`ab_runtime/`), the framework's `pyproject.toml` and `uv.lock`;
- `settings`: the stage's settings section and every kernel section but the team lead's own flags
  (`run`) and the host's paths, as the team lead hands them to its workers;
- `host`: host name, machine, the framework's Python, the package-index configuration;
- `predecessor`: the fingerprint of the model's previous completed stage, so a change upstream
  reaches every later stage.

A file under the model, the code or the training data modified after `since` (the attempt's start)
makes the fingerprint `UNSTABLE`: the stage may have read either version, so it is never reused.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ab_runtime.fileops import sha256_file
from ascendbridge.board.records import ModelRecord
from ascendbridge.config import REPO_ROOT, RUNTIME_DIR
from ascendbridge.settings import FLAG_SECTIONS, HOST_SECTIONS
from ascendbridge.stage_table import describe
from ascendbridge.stages import STAGES

BIG_FILE_BYTES = 16 << 20  # above this a file is known by its size and mtime (weights), not its bytes
SKIPPED_DIRS = frozenset({"__pycache__", ".venv", ".attempts", ".git", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
UNPINNED = "unpinned"
UNSTABLE = "unstable"
INDEX_VARIABLES = (
    "ASCENDBRIDGE_WHEELHOUSE",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
    "UV_FIND_LINKS",
    "UV_INDEX",
    "UV_DEFAULT_INDEX",
)
REGISTERED = ("model_id", "source", "url", "path", "revision", "allow_remote_code", "env_mode", "env_python")


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class Tree:
    """Every file under a root (relative path -> sha256, or size:mtime for a big one) and the newest mtime."""

    files: dict[str, str] = field(default_factory=dict)
    newest: float = 0.0
    newest_path: str = ""


def tree(root: Path) -> Tree:
    """A file, or every file under a directory but caches and environments (SKIPPED_DIRS, *.pyc)."""
    out = Tree()
    paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() or p.is_symlink())
    for path in paths:
        rel = path.name if path == root else path.relative_to(root).as_posix()
        if SKIPPED_DIRS.intersection(Path(rel).parts) or path.suffix == ".pyc":
            continue
        try:
            st = path.stat()
            big = st.st_size > BIG_FILE_BYTES
            out.files[rel] = f"{st.st_size}:{st.st_mtime_ns}" if big else sha256_file(path)
        except OSError as exc:  # a dangling link or a file gone meanwhile: a value that never matches a good one
            out.files[rel] = f"unreadable: {exc.strerror}"
            continue
        if st.st_mtime > out.newest:
            out.newest, out.newest_path = st.st_mtime, str(path)
    return out


class Hasher:
    """The digests of one pass (a main job's check, one completion): each tree walked once."""

    def __init__(self, since: float | None = None) -> None:
        self.since = since  # files modified after it make the fingerprint UNSTABLE
        self._trees: dict[Path, Tree] = {}
        self.unstable: str = ""

    def tree_digest(self, root: Path) -> str:
        if root not in self._trees:
            self._trees[root] = tree(root) if root.exists() else Tree({"": "missing"})
        found = self._trees[root]
        if self.since is not None and found.newest > self.since and not self.unstable:
            self.unstable = f"{found.newest_path} changed while the attempt ran"
        return digest(found.files)

    def many(self, roots: Iterable[Path]) -> str:
        return digest([(str(r), self.tree_digest(r)) for r in roots])


def registration(model: ModelRecord) -> str:
    own = {name: getattr(model, name) for name in REGISTERED}
    job = model.training.model_dump() if model.training else None
    return digest({**own, "skip_stages": sorted(model.skip_stages), "training_job": job})


def model_files(model: ModelRecord, hasher: Hasher) -> str:
    data = model.training.data if model.training else ""
    data_part = hasher.tree_digest(Path(data)) if data and not data.startswith("hf:") else data
    if model.path:
        return digest([hasher.tree_digest(Path(model.path)), data_part])
    if model.source == "huggingface" and not model.revision:
        return UNPINNED
    return digest([model.source, model.revision, data_part])


def code(stage: str, hasher: Hasher) -> str:
    package = describe(stage).package
    return hasher.many(
        [package, REPO_ROOT / "ascendbridge", RUNTIME_DIR, REPO_ROOT / "pyproject.toml", REPO_ROOT / "uv.lock"]
    )


def settings(stage: str, payload: Mapping[str, Any]) -> str:
    """The stage's section and the kernel's, as the team lead's workers get them (defaults left out:
    a default is part of the code)."""
    own = {
        name: values
        for name, values in payload.items()
        if name not in FLAG_SECTIONS | HOST_SECTIONS and (name == stage or name not in STAGES)
    }
    return digest(own)


def host() -> str:
    index = {name: os.environ.get(name) for name in INDEX_VARIABLES}
    return digest([platform.node(), platform.machine(), sys.version, index])


def fingerprint(
    model: ModelRecord, stage: str, payload: Mapping[str, Any], predecessor: str | None, hasher: Hasher
) -> dict[str, str]:
    """Part name -> digest (`UNPINNED` / `UNSTABLE` values say why the stage cannot be reused)."""
    parts = {
        "registration": registration(model),
        "model_files": model_files(model, hasher),
        "code": code(stage, hasher),
        "settings": settings(stage, payload),
        "host": host(),
        "predecessor": predecessor or "",
    }
    if hasher.unstable:
        parts[UNSTABLE] = hasher.unstable
    return parts
