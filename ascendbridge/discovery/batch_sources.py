"""Where a batch's candidates come from: the Hub listing, a list of ids, or the local HF cache.

Each source turns what it reads into Candidates through discovery's own assembly, so the rules
applied afterwards (licence, size, gated, remote code) see the same ModelInfo fields the
Discovery stage sees. Nothing here downloads weights: the listing carries the Hub's safetensors
parameter count, and the weight files' sha256 come from the file metadata the Hub serves (or, in
the cache, from the blob names, which huggingface_hub sets to the sha256 of LFS files).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ascendbridge import capped_read
from ascendbridge.discovery import model_files as mf
from ascendbridge.discovery.assemble import SourceFacts, assemble
from ascendbridge.discovery.batch_model import SORT_KEYS, BatchQuery, Candidate
from ascendbridge.discovery.errors import DiscoveryError, HubUnreachableError
from ascendbridge.discovery.hub import (
    hub_api,
    hub_counted_weights,
    hub_endpoint,
    hub_timeout,
    hub_token,
    info_from_cache,
    network_error,
    translate_hub_error,
)
from ascendbridge.discovery.model_info import ModelInfo
from ascendbridge.naming import InvalidModelIdError, validate_model_id
from ascendbridge.registration_file import RegistrationFileError, parse_registration_file

DEFAULT_LIMIT = 50
DEFAULT_SORT = "downloads"
# Everything the selection reads, in one listing request (the Hub returns only what is expanded).
LISTING_EXPAND = [
    "pipeline_tag",
    "library_name",
    "downloads",
    "likes",
    "trendingScore",
    "lastModified",
    "gated",
    "cardData",
    "config",
    "safetensors",
    "siblings",
    "tags",
    "sha",
]
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
ID_KEYS = ("model_id", "id", "modelId")


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]


def base_models_of(card: dict[str, Any], tags: Iterable[str]) -> list[str]:
    """The card's base_model plus the Hub's `base_model:[relation:]org/name` tags."""
    found = _as_list(card.get("base_model"))
    found += [t.rsplit(":", 1)[-1] for t in tags if t.startswith("base_model:")]
    return sorted(set(found))


def _licence(card: dict[str, Any], tags: Iterable[str]) -> str | None:
    return mf.license_of(card) or next((t.split(":", 1)[1] for t in tags if t.startswith("license:")), None)


def _unavailable(model_id: str, rank: int, error: DiscoveryError, source: str = "huggingface") -> Candidate:
    """A listed model that could not be read: a dropped row with the reason, not a failed batch."""
    cand = Candidate(
        model_id=model_id, rank=rank, repo_key=model_id.casefold(), info=ModelInfo(model_id=model_id, source=source)
    )
    cand.drop(error.rule, str(error))
    return cand


# ---------------------------------------------------------------------------- the Hub
def candidate_from_hub(model: Any, rank: int, listed_as: str | None = None) -> Candidate:
    """A huggingface_hub ModelInfo (from list_models or model_info) as a Candidate."""
    siblings = list(model.siblings or [])
    files = {s.rfilename: s.size for s in siblings}
    card = model.card_data.to_dict() if model.card_data is not None else {}
    tags = list(model.tags or [])
    info = assemble(
        SourceFacts(
            model_id=model.id,
            source="huggingface",
            config=dict(model.config or {}),
            files=files,
            weights=hub_counted_weights(model.safetensors, files),
            card=card,
            resolved_revision=model.sha,
            gated=bool(model.gated),
            license=_licence(card, tags),
        )
    )
    if "custom_code" in tags:  # the Hub tags repos that ship code, even when the listing omits auto_map
        info.needs_remote_code = True
    hashes = sorted(s.lfs.sha256 for s in siblings if s.lfs is not None and mf.is_weight_file(s.rfilename))
    cand = Candidate(
        model_id=model.id,
        rank=rank,
        repo_key=str(model.__dict__.get("_id") or model.id.casefold()),
        task=model.pipeline_tag,
        library=model.library_name,
        languages=_as_list(card.get("language")),
        downloads=model.downloads,
        likes=model.likes,
        tags=tags,
        base_models=base_models_of(card, tags),
        weight_sha256=hashes,
        info=info,
    )
    if listed_as and listed_as != model.id:
        cand.detail = f"listed as {listed_as}"
    return cand


def _listing_error(exc: Exception) -> DiscoveryError:
    from huggingface_hub import errors as e

    cause = exc.__cause__ or exc.__context__
    if network_error(exc) or (cause is not None and network_error(cause)):
        return HubUnreachableError(
            f"cannot reach the Hugging Face Hub at {hub_endpoint()} "
            f"({type(cause or exc).__name__}); use --cache or --from FILE offline"
        )
    if isinstance(exc, e.HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else "?"
        return DiscoveryError(f"the Hub at {hub_endpoint()} answered HTTP {status} to the model listing", "hub_error")
    return DiscoveryError(f"listing models on {hub_endpoint()} failed: {type(exc).__name__}", "hub_error")


def _check_reachable() -> None:
    """One request with the discovery timeout and no retries: list_models itself retries network
    errors with backoff for ~25 s, too long to tell a user that the endpoint is wrong."""
    from huggingface_hub import get_session

    try:
        get_session().get(f"{hub_endpoint()}/api/models", params={"limit": 1}, timeout=hub_timeout())
    except Exception as exc:
        raise _listing_error(exc) from None


def hub_listing(query: BatchQuery) -> list[Candidate]:
    """HfApi.list_models with the query's filters, in the Hub's order for the sort key."""
    _check_reachable()
    api = hub_api(hub_token())
    filters = [f for f in (query.library, query.language) if f]
    try:
        models = list(
            api.list_models(
                filter=filters or None,
                author=query.author,
                search=query.search,
                pipeline_tag=query.task,
                sort=SORT_KEYS[query.sort or DEFAULT_SORT],
                limit=query.limit or DEFAULT_LIMIT,
                expand=LISTING_EXPAND,
            )
        )
    except Exception as exc:  # translated to one line
        raise _listing_error(exc) from None
    return [candidate_from_hub(m, rank) for rank, m in enumerate(models, start=1)]


def _model_info(api: Any, model_id: str) -> Any:
    try:
        return api.model_info(model_id, files_metadata=True, timeout=hub_timeout())
    except Exception as exc:
        raise translate_hub_error(exc, model_id, "model info") from None


def hub_models(ids: list[str], sort: str | None) -> list[Candidate]:
    """The listed ids through HfApi.model_info; a renamed repo comes back under its new id."""
    api = hub_api(hub_token())
    found: list[tuple[Any, str]] = []
    failed: list[tuple[int, str, DiscoveryError]] = []
    for index, model_id in enumerate(ids):
        try:
            found.append((_model_info(api, model_id), model_id))
        except HubUnreachableError:
            raise
        except DiscoveryError as exc:
            failed.append((index, model_id, exc))
    if sort:
        attr = SORT_KEYS[sort]
        found.sort(key=lambda pair: (getattr(pair[0], attr) is not None, getattr(pair[0], attr)), reverse=True)
    out = [candidate_from_hub(m, rank, listed_as=name) for rank, (m, name) in enumerate(found, start=1)]
    out += [_unavailable(name, len(found) + n, exc) for n, (_, name, exc) in enumerate(failed, start=1)]
    return out


def add_weight_hashes(candidates: list[Candidate]) -> None:
    """sha256 of each weight file, from the Hub's file metadata (the listing has names only)."""
    api = hub_api(hub_token())
    for cand in candidates:
        if cand.weight_sha256 or cand.info.source != "huggingface":
            continue
        try:
            model = _model_info(api, cand.model_id)
        except HubUnreachableError:
            raise
        except DiscoveryError:
            continue  # no hashes: this model cannot be matched as a fork, nothing more
        cand.weight_sha256 = sorted(
            s.lfs.sha256 for s in model.siblings or [] if s.lfs is not None and mf.is_weight_file(s.rfilename)
        )


# ---------------------------------------------------------------------------- offline
def cached_model_ids(cache: Path) -> list[str]:
    """Every model repository in the HF cache, by id (the cache has no ranking)."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        repos = scan_cache_dir(cache).repos
    except CacheNotFound:
        raise DiscoveryError(f"no HF cache at {cache}", "not_in_cache") from None
    return sorted(r.repo_id for r in repos if r.repo_type == "model")


def _blob_sha256(snapshot: Path, name: str) -> str | None:
    """huggingface_hub names an LFS file's blob by its sha256; other blobs by their git sha1."""
    blob = (snapshot / name).resolve().name
    return blob if SHA256_RE.match(blob) else None


def cache_candidates(cache: Path, ids: list[str]) -> list[Candidate]:
    out: list[Candidate] = []
    for rank, model_id in enumerate(ids, start=1):
        try:
            info = info_from_cache(model_id, None, str(cache))
        except DiscoveryError as exc:
            out.append(_unavailable(model_id, rank, exc, source="hf-cache"))
            continue
        snapshot = Path(info.local_dir or "")
        card, _ = mf.card_metadata(snapshot / "README.md")
        tags = _as_list(card.get("tags"))
        hashes = [_blob_sha256(snapshot, n) for n in info.weight_files]
        out.append(
            Candidate(
                model_id=model_id,
                rank=rank,
                repo_key=model_id.casefold(),
                task=card.get("pipeline_tag"),
                library=card.get("library_name"),
                languages=_as_list(card.get("language")),
                tags=tags,
                base_models=base_models_of(card, tags),
                weight_sha256=sorted(h for h in hashes if h) if all(hashes) else [],
                info=info,
            )
        )
    return out


def query_mismatch(cand: Candidate, query: BatchQuery) -> str | None:
    """Why a model from a list or the cache falls outside the query (the Hub filters its listing)."""
    if query.task and cand.task != query.task:
        return f"task {cand.task or 'unknown'}, not {query.task}"
    if query.library and query.library not in (cand.library, *cand.tags):
        return f"library {cand.library or 'unknown'}, not {query.library}"
    if query.author and cand.model_id.split("/")[0].casefold() != query.author.casefold():
        return f"author is not {query.author}"
    if query.search and query.search.casefold() not in cand.model_id.casefold():
        return f"id does not contain '{query.search}'"
    if query.language and query.language not in cand.languages + cand.tags:
        return f"language {', '.join(cand.languages) or 'unknown'}, not {query.language}"
    return None


def read_id_list(path: Path) -> list[str]:
    """Model ids from a text file (one per line, # comments) or a JSON array of ids or objects
    with a model_id / id / modelId field (e.g. saved from the Hub API)."""
    try:
        text = capped_read.read_text(path, capped_read.LIST_MAX_BYTES)
    except (OSError, UnicodeDecodeError) as exc:
        raise DiscoveryError(
            f"cannot read model list {path}: {getattr(exc, 'strerror', None) or exc}", "bad_list"
        ) from None
    if not text.lstrip().startswith("["):
        try:
            return [reg.model_id for reg in parse_registration_file(path)]
        except RegistrationFileError as exc:
            raise DiscoveryError(str(exc), "bad_list") from None
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DiscoveryError(f"{path}: invalid JSON ({exc.msg} at line {exc.lineno})", "bad_list") from None
    ids: list[str] = []
    for number, item in enumerate(items, start=1):
        value = (
            item
            if isinstance(item, str)
            else next((item[k] for k in ID_KEYS if isinstance(item, dict) and isinstance(item.get(k), str)), None)
        )
        try:
            if value is None:
                raise InvalidModelIdError(f"needs a string or an object with {'/'.join(ID_KEYS)}")
            validate_model_id(value)
        except InvalidModelIdError as exc:
            raise DiscoveryError(f"{path} item {number}: {exc}", "bad_list") from None
        ids.append(value)
    if not ids:
        raise DiscoveryError(f"model list {path} lists no models", "bad_list")
    return ids
