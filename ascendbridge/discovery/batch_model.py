"""A batch of models being selected: the query that found them, the policy that filters them,
and one row per candidate saying why it was kept or dropped.

The query is what the Hub listing is asked (or, offline, what a cache or a list is matched
against); the policy is applied to every candidate whatever its source, so the Hub, the local
cache and a list of ids select the same way.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from ascendbridge.discovery.model_info import ModelInfo

# What users type -> huggingface_hub's ModelSort_T.
SORT_KEYS: dict[str, str] = {
    "downloads": "downloads",
    "likes": "likes",
    "trending": "trending_score",
    "last_modified": "last_modified",
}
MAX_LIMIT = 10_000


class BatchQuery(BaseModel):
    """Which models to look at: HfApi.list_models' parameters, validated before any request."""

    task: str | None = None  # pipeline tag, e.g. text-generation, feature-extraction
    library: str | None = None  # e.g. transformers, sentence-transformers
    author: str | None = None
    search: str | None = None
    language: str | None = None  # e.g. en
    sort: str | None = None  # None: the Hub listing by downloads, a list in its own order
    limit: int | None = None  # None: 50 from the Hub listing, all of a list or the cache

    @field_validator("sort")
    @classmethod
    def _known_sort(cls, value: str | None) -> str | None:
        if value is not None and value not in SORT_KEYS:
            raise ValueError(f"unknown sort key '{value}' (expected one of: {', '.join(SORT_KEYS)})")
        return value

    @field_validator("limit")
    @classmethod
    def _sane_limit(cls, value: int | None) -> int | None:
        if value is not None and not 1 <= value <= MAX_LIMIT:
            raise ValueError(f"limit {value} is out of range (1..{MAX_LIMIT})")
        return value


class BatchPolicy(BaseModel):
    """What a kept model must satisfy; the device rules come from discovery.decisions."""

    licenses: list[str] = Field(default_factory=list)  # lower-case allow-list; empty: any licence
    allow_remote_code: bool = False
    exclude_gated: bool = False  # drop gated repos even when a token is set
    has_token: bool = False
    max_params: int | None = None
    memory_gb: float | None = None  # None: ASCENDBRIDGE_DEVICE_MEMORY_GB (decisions.py)


class Candidate(BaseModel):
    """One model of the batch, in rank order, with its verdict."""

    model_id: str
    rank: int  # 1-based position in the listing / list / cache
    repo_key: str  # identity of the repository: the Hub's internal id, else the case-folded id
    task: str | None = None
    library: str | None = None
    languages: list[str] = Field(default_factory=list)
    downloads: int | None = None
    likes: int | None = None
    tags: list[str] = Field(default_factory=list)
    base_models: list[str] = Field(default_factory=list)  # card base_model and base_model:* tags
    weight_sha256: list[str] = Field(default_factory=list)  # sorted; empty when unknown
    info: ModelInfo
    kept: bool = True
    rule: str | None = None  # why it was dropped: license_not_allowed, too_large, same_weights, ...
    why: str = ""  # short reason for the table
    detail: str = ""  # the full reason
    duplicate_of: str | None = None

    def drop(self, rule: str, why: str, detail: str = "", duplicate_of: str | None = None) -> None:
        self.kept, self.rule, self.why = False, rule, why
        self.detail = detail or why
        self.duplicate_of = duplicate_of

    def row(self) -> dict[str, Any]:
        """The candidate as `--json` prints it."""
        info = self.info
        return {
            "rank": self.rank,
            "model_id": self.model_id,
            "task": self.task,
            "library": self.library,
            "parameters": info.parameter_count,
            "parameter_source": info.parameter_count_source,
            "license": info.license,
            "downloads": self.downloads,
            "likes": self.likes,
            "gated": info.gated,
            "remote_code": info.needs_remote_code,
            "task_family": info.task_family,
            "kept": self.kept,
            "rule": self.rule,
            "why": self.why,
            "detail": self.detail,
            "duplicate_of": self.duplicate_of,
        }
