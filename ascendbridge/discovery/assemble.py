"""Turn the raw facts one source gathered into a ModelInfo. One place, so a model described by
the Hub, by the HF cache and by a local copy comes out identical."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ascendbridge.discovery import model_files as mf
from ascendbridge.discovery.config_estimate import estimate_parameters, num_layers
from ascendbridge.discovery.model_info import ModelInfo
from ascendbridge.discovery.safetensors_header import WeightsSummary
from ascendbridge.discovery.task_family import classify


@dataclass
class SourceFacts:
    """What a source read: the file listing (relative names -> size in bytes, None if unknown),
    the parsed config and card, the weight headers, and sentence-transformers modules."""

    model_id: str
    source: str
    config: dict[str, Any]
    files: dict[str, int | None]
    weights: WeightsSummary | None = None
    card: dict[str, Any] = field(default_factory=dict)
    revision: str | None = None
    resolved_revision: str | None = None
    local_dir: str | None = None
    gated: bool | None = None
    license: str | None = None
    sentence_transformers: bool = False
    pooling: str | None = None
    normalize: bool = False
    warnings: list[str] = field(default_factory=list)


def weight_files(facts: SourceFacts) -> list[str]:
    """The files the model loads from: the safetensors headers read, else other weight files."""
    if facts.weights is not None:
        return list(facts.weights.files)
    return sorted(n for n in facts.files if mf.is_weight_file(n))


def assemble(facts: SourceFacts) -> ModelInfo:
    mf.check_tokenizer_sizes(facts.files)
    cfg = facts.config
    names = list(facts.files)
    cls = classify(cfg, facts.sentence_transformers, mf.pipeline_tag(facts.card), facts.pooling)
    warnings = list(facts.warnings)
    weights = weight_files(facts)
    sizes = [facts.files.get(n) for n in weights]
    size_bytes = sum(s for s in sizes if s is not None) if weights and None not in sizes else None

    if facts.weights is not None:
        count: int | None = facts.weights.parameter_count
        count_source = "safetensors"
        dtype = facts.weights.dtype
        by_dtype = facts.weights.parameters_by_dtype
        if facts.weights.buffer_elements:
            warnings.append(
                f"{facts.weights.buffer_elements} elements of non-float tensors (buffers such as "
                "position_ids) are not counted as parameters"
            )
    else:
        count = estimate_parameters(cfg)
        count_source = "config_estimate" if count is not None else "unknown"
        dtype = mf.config_dtype(cfg)
        if dtype is None:
            dtype = "float32"  # what transformers loads when config.json names no dtype
            warnings.append("config.json names no dtype: float32 assumed (transformers' default)")
        by_dtype = {}
        if weights:
            warnings.append(f"weights are not safetensors ({weights[0]}); parameter count estimated from config.json")
        elif count is not None:
            warnings.append("no weights: parameter count estimated from config.json")
    code_files = mf.remote_code_files(names, cfg)
    archs = cfg.get("architectures") or []
    return ModelInfo(
        model_id=facts.model_id,
        source=facts.source,
        revision=facts.revision,
        resolved_revision=facts.resolved_revision,
        local_dir=facts.local_dir,
        config=cfg,
        architectures=list(archs),
        model_type=cfg.get("model_type"),
        task_family=cls.family,
        task_family_reason=cls.reason,
        model_class=cls.model_class,
        parameter_count=count,
        parameter_count_source=count_source,
        parameters_by_dtype=by_dtype,
        buffer_elements=facts.weights.buffer_elements if facts.weights else 0,
        dtype=dtype,
        size_bytes=size_bytes,
        has_weights=bool(weights),
        weight_files=weights,
        num_layers=num_layers(cfg),
        license=facts.license or mf.license_of(facts.card),
        gated=facts.gated if facts.gated is not None else mf.gated_in_card(facts.card),
        needs_remote_code=mf.needs_remote_code(cfg, code_files),
        remote_code_files=code_files,
        has_tokenizer=mf.has_any(names, mf.TOKENIZER_FILES),
        has_processor=mf.has_any(names, mf.PROCESSOR_FILES),
        sentence_transformers=facts.sentence_transformers,
        sentence_transformers_pooling=facts.pooling,
        sentence_transformers_normalize=facts.normalize,
        warnings=warnings,
    )
