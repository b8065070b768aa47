"""Discover a model from a directory on disk: a local copy or a snapshot in the HF cache."""

from __future__ import annotations

import os
from pathlib import Path

from ascendbridge.discovery import model_files as mf
from ascendbridge.discovery.assemble import SourceFacts, assemble
from ascendbridge.discovery.errors import DiscoveryError
from ascendbridge.discovery.model_info import ModelInfo
from ascendbridge.discovery.safetensors_header import summarize_directory

MAX_LISTED_FILES = 5000  # a model directory, not a dataset: stop listing past this


def list_files(directory: Path, max_depth: int = 2) -> dict[str, int | None]:
    """Relative file names (symlinks followed, as the HF cache's snapshots are links) -> size."""
    out: dict[str, int | None] = {}
    base_depth = len(directory.parts)
    for root, dirs, files in os.walk(directory, followlinks=False):
        rel_depth = len(Path(root).parts) - base_depth
        dirs[:] = [d for d in dirs if not d.startswith(".") and rel_depth < max_depth - 1]
        for name in files:
            path = Path(root) / name
            try:
                size: int | None = path.stat().st_size
            except OSError:
                size = None  # a dangling link (an incomplete cache download)
            out[path.relative_to(directory).as_posix()] = size
            if len(out) >= MAX_LISTED_FILES:
                return out
    return out


def check_directory(directory: Path) -> Path:
    if not directory.exists():
        raise DiscoveryError(f"model directory {directory} does not exist", "missing_directory")
    if not directory.is_dir():
        raise DiscoveryError(f"{directory} is not a directory", "missing_directory")
    if not (directory / mf.CONFIG_FILE).is_file():
        raise DiscoveryError(f"no config.json in {directory} (not a Hugging Face model directory)", "missing_config")
    return directory


def info_from_directory(
    directory: Path, model_id: str, source: str, revision: str | None = None, resolved_revision: str | None = None
) -> ModelInfo:
    directory = check_directory(directory.expanduser().resolve())
    config = mf.load_config(directory / mf.CONFIG_FILE)
    files = list_files(directory)
    card, card_warning = mf.card_metadata(directory / "README.md")
    is_st, pooling, normalize = mf.sentence_transformers_info(directory)
    facts = SourceFacts(
        model_id=model_id,
        source=source,
        config=config,
        files=files,
        weights=summarize_directory(directory),
        card=card,
        revision=revision,
        resolved_revision=resolved_revision,
        local_dir=str(directory),
        sentence_transformers=is_st,
        pooling=pooling,
        normalize=normalize,
        warnings=[card_warning] if card_warning else [],
    )
    return assemble(facts)
