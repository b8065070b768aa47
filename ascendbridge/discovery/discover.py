"""One entry point for every source: discover(model_id, source, path, revision) -> ModelInfo."""

from __future__ import annotations

from pathlib import Path

from ascendbridge.discovery.directory import info_from_directory
from ascendbridge.discovery.errors import DiscoveryError
from ascendbridge.discovery.hub import info_from_cache, info_from_hub
from ascendbridge.discovery.model_info import ModelInfo
from ascendbridge.naming import InvalidModelIdError, validate_model_id

SOURCES = ("huggingface", "local", "hf-cache")


def discover(
    model_id: str, source: str = "huggingface", path: str | None = None, revision: str | None = None
) -> ModelInfo:
    """Read a model's metadata. For 'local', path is the model directory; for 'hf-cache' an
    optional cache directory (default: HF_HUB_CACHE / HF_HOME). Raises DiscoveryError."""
    try:
        validate_model_id(model_id)
    except InvalidModelIdError as exc:
        raise DiscoveryError(str(exc), "invalid_model_id") from None
    if source == "local":
        if not path:
            raise DiscoveryError(f"model '{model_id}': source 'local' needs a path", "missing_directory")
        return info_from_directory(Path(path), model_id, "local", revision)
    if source == "hf-cache":
        return info_from_cache(model_id, revision, cache_override=path)
    if source == "huggingface":
        return info_from_hub(model_id, revision)
    raise DiscoveryError(f"unknown source '{source}' (expected one of: {', '.join(SOURCES)})", "bad_source")
