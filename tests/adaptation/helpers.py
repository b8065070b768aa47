"""Shared builders for the adaptation tests: a tiny local BERT config and its spec, and discovery's
ModelInfo on a config-only model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from ascendbridge.discovery.model_info import ModelInfo
from ascendbridge.package.spec import AdaptationSpec, InputRecipe, ModelSource
from bench.support.local_model import TINY_BERT_CONFIG


def tiny_bert_dir(root: Path) -> Path:
    """A config-only local model directory (dry runs never need weights)."""
    model_dir = root / "models" / "tiny-bert"
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.json").write_text(json.dumps(TINY_BERT_CONFIG))
    return model_dir


def tiny_bert_spec(model_dir: Path, name: str = "tiny-bert") -> AdaptationSpec:
    return AdaptationSpec(
        name=name,
        model=ModelSource(model_id="demo/tiny-bert", source="local", path=str(model_dir), has_weights=False),
        task_family="feature_extraction",
        model_class="BertModel",
        architecture="BertModel",
        model_type="bert",
        inputs=InputRecipe(input_names=["input_ids", "attention_mask"], seq_len=16),
    )


def discovered_info(
    model_id: str,
    architecture: str,
    task_family: str | None,
    config: dict[str, Any],
    source: Literal["huggingface", "local", "hf-cache"] = "huggingface",
    **found: Any,
) -> ModelInfo:
    """What discovery reports on a model from its config: its one architecture is the class loaded
    (none without a task family); `found` adds the rest (counts, weights, reasons)."""
    model_class = architecture if task_family else None
    return ModelInfo(
        model_id=model_id,
        source=source,
        config=config,
        architectures=[architecture],
        model_type=config.get("model_type"),
        task_family=task_family,
        model_class=model_class,
        **found,
    )


# discovery found no task family for its architecture
UNKNOWN_FAMILY = discovered_info(
    "org/odd",
    "OddForSomething",
    None,
    {"model_type": "odd"},
    task_family_reason="architecture OddForSomething has no supported task family",
)
# a causal LM whose code ships with its repository
REMOTE_CODE = discovered_info(
    "org/custom", "CustomForCausalLM", "causal_lm", {"model_type": "custom"}, needs_remote_code=True
)
