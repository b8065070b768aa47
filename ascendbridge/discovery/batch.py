"""Find the batch: candidates from the Hub listing (or a list of ids, or the local HF cache),
selected by one set of rules, and the board registrations of the kept ones, by rank."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ascendbridge.board import Registration
from ascendbridge.discovery import batch_select as select
from ascendbridge.discovery import batch_sources as sources
from ascendbridge.discovery.batch_model import BatchPolicy, BatchQuery, Candidate
from ascendbridge.discovery.errors import DiscoveryError
from ascendbridge.discovery.hub import cache_dir, hub_offline


@dataclass
class BatchResult:
    source: str  # "hub listing", "hub: <file>", "hf-cache: <dir>"
    query: BatchQuery
    policy: BatchPolicy
    candidates: list[Candidate]
    cache: Path | None = None  # set when the models were read from the local HF cache

    @property
    def kept(self) -> list[Candidate]:
        return [c for c in self.candidates if c.kept]


def find_batch(
    query: BatchQuery, policy: BatchPolicy, id_list: Path | None = None, cache: str | None = None
) -> BatchResult:
    """Read the candidates and apply every rule. `cache` ('' for the default cache) or
    HF_HUB_OFFLINE selects the local HF cache; `id_list` restricts the batch to listed ids."""
    ids = sources.read_id_list(id_list) if id_list is not None else None
    cache_path: Path | None = None
    if cache is not None or hub_offline():
        if query.sort:
            raise DiscoveryError("--sort needs the Hub: the cache has no downloads or likes to rank by", "bad_query")
        cache_path = cache_dir(cache or None)
        cached = ids if ids is not None else sources.cached_model_ids(cache_path)
        candidates = sources.cache_candidates(cache_path, cached)
        source = f"hf-cache: {cache_path}"
    elif ids is not None:
        candidates = sources.hub_models(ids, query.sort)
        source = f"hub: {id_list}"
    else:
        candidates = sources.hub_listing(query)
        source = "hub listing"
    if source != "hub listing":
        for cand in candidates:
            mismatch = sources.query_mismatch(cand, query) if cand.kept else None
            if mismatch:
                cand.drop("not_matching", mismatch)
        if query.limit is not None:
            for cand in candidates[query.limit :]:
                cand.drop("over_limit", f"beyond --limit {query.limit}")
    select.drop_same_repository(candidates)
    select.apply_policy(candidates, policy)
    if cache_path is None:
        sources.add_weight_hashes([c for c in candidates if c.kept])
    select.drop_same_weights(candidates)
    select.drop_variants(candidates)
    return BatchResult(source=source, query=query, policy=policy, candidates=candidates, cache=cache_path)


def registrations(result: BatchResult) -> list[Registration]:
    """The kept models, the best-ranked with the highest priority (higher runs first)."""
    kept = result.kept
    sort = result.query.sort or (sources.DEFAULT_SORT if result.source == "hub listing" else None)
    by = f" by {sort}" if sort else ""
    return [
        Registration(
            model_id=c.model_id,
            source="hf-cache" if result.cache is not None else "huggingface",
            path=str(result.cache) if result.cache is not None else None,
            priority=len(kept) - index,
            allow_remote_code=result.policy.allow_remote_code and c.info.needs_remote_code,
            description=f"found by discover: rank {c.rank}{by} ({result.source})",
        )
        for index, c in enumerate(kept)
    ]
