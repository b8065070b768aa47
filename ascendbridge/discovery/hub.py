"""The Hugging Face Hub and its local cache, through huggingface_hub's own code paths.

Settings are read from the environment at call time (HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE,
HF_HUB_CACHE / HF_HOME), not at import time, so one process can discover from several caches.
From the Hub only config.json, the small sentence-transformers files and the safetensors headers
(HTTP range reads) are fetched, never the weights. Every network call has a short timeout.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ascendbridge.discovery import model_files as mf
from ascendbridge.discovery.assemble import SourceFacts, assemble
from ascendbridge.discovery.directory import info_from_directory
from ascendbridge.discovery.errors import DiscoveryError, HubUnreachableError
from ascendbridge.discovery.model_info import ModelInfo
from ascendbridge.discovery.safetensors_header import DTYPE_BITS, FLOAT_DTYPES, WeightsSummary, check_header, summarize

DEFAULT_TIMEOUT_S = 10.0
SMALL_FILES = ("modules.json", "1_Pooling/config.json", "README.md")


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def hub_offline() -> bool:
    return _truthy("HF_HUB_OFFLINE") or _truthy("TRANSFORMERS_OFFLINE")


def hub_endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def hub_timeout() -> float:
    """ASCENDBRIDGE_HUB_TIMEOUT: the discovery stage's section (discovery/settings.py), read by name;
    DEFAULT_TIMEOUT_S where no discovery stage is installed."""
    from ascendbridge.settings import named_section

    found = named_section("discovery")
    return float(getattr(found, "hub_timeout", DEFAULT_TIMEOUT_S))


def hub_token() -> str | None:
    """HF_TOKEN or the token saved by `hf auth login`; never logged or stored."""
    from huggingface_hub import get_token

    return os.environ.get("HF_TOKEN") or get_token()


def cache_dir(override: str | None = None) -> Path:
    """HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if override:
        return Path(override).expanduser()
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(name):
            return Path(os.environ[name]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "huggingface"
    )
    return Path(home).expanduser() / "hub"


def cached_snapshot(model_id: str, revision: str | None, cache: Path) -> Path:
    """The snapshot folder of a cached model, resolved offline by huggingface_hub itself."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        return Path(snapshot_download(model_id, revision=revision, cache_dir=str(cache), local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError):
        at = f" at revision {revision}" if revision else ""
        raise DiscoveryError(f"model {model_id}{at} is not in the local HF cache ({cache})", "not_in_cache") from None
    except HFValidationError:
        raise DiscoveryError(f"'{model_id}' is not a valid Hugging Face repo id", "invalid_model_id") from None


def info_from_cache(
    model_id: str, revision: str | None, cache_override: str | None = None, source: str = "hf-cache"
) -> ModelInfo:
    snapshot = cached_snapshot(model_id, revision, cache_dir(cache_override))
    info = info_from_directory(snapshot, model_id, source, revision, resolved_revision=snapshot.name)
    if not info.has_weights:
        info.warnings.append("the cached snapshot holds no weights (only config files were downloaded)")
    return info


NETWORK_ERROR_NAMES = frozenset({"TransportError", "TimeoutException", "ConnectionError", "Timeout"})
HTTP_LIBRARIES = frozenset({"httpx", "httpx2", "requests", "urllib3"})


def network_error(exc: BaseException) -> bool:
    """A transport failure of whichever HTTP client this huggingface_hub version uses."""
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    return any(
        c.__name__ in NETWORK_ERROR_NAMES and c.__module__.split(".")[0] in HTTP_LIBRARIES for c in type(exc).__mro__
    )


def translate_hub_error(exc: Exception, model_id: str, what: str) -> DiscoveryError:
    """Map huggingface_hub / httpx failures onto one actionable line each."""
    from huggingface_hub import errors as e

    if isinstance(exc, e.GatedRepoError):
        return DiscoveryError(f"{model_id} is gated: set HF_TOKEN for an account with access", "gated_no_token")
    if isinstance(exc, e.RepositoryNotFoundError):
        return DiscoveryError(f"{model_id} not found on {hub_endpoint()} (or private: set HF_TOKEN)", "not_found")
    if isinstance(exc, e.RevisionNotFoundError):
        return DiscoveryError(f"{model_id}: revision not found on {hub_endpoint()}", "not_found")
    if isinstance(exc, e.EntryNotFoundError):
        return DiscoveryError(f"{model_id} has no {what} on {hub_endpoint()}", "missing_config")
    if isinstance(exc, e.HFValidationError):
        return DiscoveryError(f"'{model_id}' is not a valid Hugging Face repo id", "invalid_model_id")
    cause = exc.__cause__ or exc.__context__
    if network_error(exc) or (cause is not None and network_error(cause)) or isinstance(exc, e.LocalEntryNotFoundError):
        return HubUnreachableError(
            f"cannot reach the Hugging Face Hub at {hub_endpoint()} while fetching "
            f"{what} of {model_id} ({type(cause or exc).__name__}); "
            "set HF_HUB_OFFLINE=1 to use the local cache"
        )
    if isinstance(exc, e.HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else "?"
        return DiscoveryError(f"the Hub answered HTTP {status} for {what} of {model_id}", "hub_error")
    return DiscoveryError(f"fetching {what} of {model_id} failed: {type(exc).__name__}", "hub_error")


def hub_api(token: str | None) -> Any:
    """An HfApi for HF_ENDPOINT; False (not None) without a token, so no saved token leaks in."""
    from huggingface_hub import HfApi

    return HfApi(endpoint=hub_endpoint(), token=token or False)


def _remote_model_info(model_id: str, revision: str | None, token: str | None) -> tuple[Any, Any]:
    api = hub_api(token)
    try:
        return api, api.model_info(model_id, revision=revision, files_metadata=True, timeout=hub_timeout())
    except Exception as exc:  # translated to one line; nothing else is caught this broadly
        raise translate_hub_error(exc, model_id, "model info") from None


def _download(model_id: str, filename: str, sha: str, token: str | None) -> Path:
    from huggingface_hub import hf_hub_download

    try:
        return Path(
            hf_hub_download(
                model_id,
                filename,
                revision=sha,
                token=token or False,
                cache_dir=str(cache_dir()),
                endpoint=hub_endpoint(),
                etag_timeout=hub_timeout(),
            )
        )
    except Exception as exc:
        raise translate_hub_error(exc, model_id, filename) from None


def _remote_headers(api: Any, model_id: str, sha: str) -> WeightsSummary | None:
    """Safetensors headers through huggingface_hub's range-read parser, re-validated here."""
    try:
        meta = api.get_safetensors_metadata(model_id, revision=sha, timeout=hub_timeout())
    except Exception as exc:
        from huggingface_hub import errors as e

        if isinstance(exc, e.NotASafetensorsRepoError):
            return None
        if isinstance(exc, e.SafetensorsParsingError):
            raise DiscoveryError(f"{model_id}: corrupt safetensors header on the Hub", "corrupt_safetensors") from None
        raise translate_hub_error(exc, model_id, "safetensors headers") from None
    headers = []
    for fname, file_meta in sorted(meta.files_metadata.items()):
        header = {
            name: {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": list(t.data_offsets)}
            for name, t in file_meta.tensors.items()
        }
        check_header(header, fname)
        headers.append((fname, header))
    return summarize(headers)


def hub_counted_weights(counted: Any, files: dict[str, int | None]) -> WeightsSummary | None:
    """The Hub's own per-dtype count of a repo's safetensors (readable without access)."""
    if counted is None or not counted.parameters:
        return None
    out = WeightsSummary(files=sorted(n for n in files if n.endswith(".safetensors")))
    for dtype, n in counted.parameters.items():
        out.elements_by_dtype[dtype] = n
        if dtype in FLOAT_DTYPES:
            out.parameter_count += n
        else:
            out.buffer_elements += n
        if dtype in DTYPE_BITS:
            out.data_bytes += n * DTYPE_BITS[dtype] // 8
    return out


def info_from_hub(model_id: str, revision: str | None = None) -> ModelInfo:
    """Config, card data and weight headers from the Hub; the local cache when HF_HUB_OFFLINE."""
    if hub_offline():
        info = info_from_cache(model_id, revision, source="huggingface")
        info.warnings.append("HF_HUB_OFFLINE is set: read from the local HF cache")
        return info
    token = hub_token()
    api, remote = _remote_model_info(model_id, revision, token)
    sha = remote.sha or revision or "main"
    gated = bool(remote.gated)
    files = {s.rfilename: s.size for s in (remote.siblings or [])}
    card = remote.card_data.to_dict() if remote.card_data is not None else {}
    if getattr(remote, "pipeline_tag", None) and not card.get("pipeline_tag"):
        card["pipeline_tag"] = remote.pipeline_tag  # the Hub's own tag where the card declares none
    if mf.CONFIG_FILE not in files:
        raise DiscoveryError(f"{model_id} has no config.json (not a transformers model)", "missing_config")
    warnings: list[str] = []
    local_dir: str | None = None
    if gated and not token:
        # The files cannot be read without a token; the Hub's summary of the config still names
        # the architecture, and the stage blocks the model until a token is configured.
        config = dict(remote.config or {})
        warnings.append("gated repo and no HF_TOKEN: config taken from the Hub's model summary")
        weights = hub_counted_weights(remote.safetensors, files)
    else:
        config_path = _download(model_id, mf.CONFIG_FILE, sha, token)
        config = mf.load_config(config_path)
        local_dir = str(config_path.parent)
        for name in SMALL_FILES:
            if name in files:
                _download(model_id, name, sha, token)
        weights = _remote_headers(api, model_id, sha) if any(n.endswith(".safetensors") for n in files) else None
    is_st, pooling, normalize = (False, None, False)
    if local_dir is not None:
        is_st, pooling, normalize = mf.sentence_transformers_info(Path(local_dir))
    facts = SourceFacts(
        model_id=model_id,
        source="huggingface",
        config=config,
        files=files,
        weights=weights,
        card=card,
        revision=revision,
        resolved_revision=remote.sha,
        local_dir=local_dir,
        gated=gated,
        license=mf.license_of(card),
        sentence_transformers=is_st,
        pooling=pooling,
        normalize=normalize,
        warnings=warnings,
    )
    return assemble(facts)
