"""What discovery learns about a model. Stored on the board (models.metadata_json) and read by
the adapter to build the adaptation spec, so its fields are a contract between stages."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class DiscoveryDecision(BaseModel):
    """The stage's verdict on a model, with the reason a human can read."""

    action: Literal["proceed", "skip", "block"]
    reason: str
    rule: str | None = None  # e.g. "too_large", "remote_code_not_allowed", "gated_no_token"
    # How its timed stages run: {"devices": N, "strategy": "single" | "device_map", "tensor_parallel_degree",
    # "host", "kind", "per_device_gb", "need_gb"}; None when its size is unknown.
    plan: dict[str, Any] | None = None


class ModelInfo(BaseModel):
    model_id: str
    source: Literal["huggingface", "local", "hf-cache"]
    revision: str | None = None
    local_dir: str | None = None  # directory holding config.json (local / cached snapshot)
    config: dict[str, Any] = Field(default_factory=dict)  # config.json as parsed
    architectures: list[str] = Field(default_factory=list)
    model_type: str | None = None
    task_family: str | None = None  # one of ascendbridge.task_families.TASK_FAMILIES or None
    task_family_reason: str = ""
    model_class: str | None = None  # transformers class to load (architecture or auto class)
    parameter_count: int | None = None
    parameter_count_source: Literal["safetensors", "config_estimate", "unknown"] = "unknown"
    dtype: str | None = None  # e.g. "float32", "bfloat16" (from headers or config)
    size_bytes: int | None = None  # weights on disk (or in the repo)
    has_weights: bool = False
    weight_files: list[str] = Field(default_factory=list)
    num_layers: int | None = None
    license: str | None = None
    gated: bool | None = None
    needs_remote_code: bool = False
    remote_code_files: list[str] = Field(default_factory=list)
    has_tokenizer: bool = False
    has_processor: bool = False
    sentence_transformers_pooling: str | None = None  # "mean" | "cls" | "max" | None
    warnings: list[str] = Field(default_factory=list)
    # Added by discovery (additive; the fields above are the original contract).
    resolved_revision: str | None = None  # commit of the cached / hub snapshot read
    parameters_by_dtype: dict[str, int] = Field(default_factory=dict)  # from safetensors headers
    buffer_elements: int = 0  # non-float tensors in the weights (e.g. position_ids), not parameters
    sentence_transformers: bool = False  # modules.json present
    sentence_transformers_normalize: bool = False  # a Normalize module follows the pooling
    decision: DiscoveryDecision | None = None  # the stage's verdict, with its reason
