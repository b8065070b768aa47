"""Shared builders for the adaptation tests: a tiny local BERT config and its spec."""

from __future__ import annotations

import json
from pathlib import Path

from ascendbridge.package.spec import AdaptationSpec, InputRecipe, ModelSource

TINY_BERT_CONFIG = {
    "architectures": ["BertModel"],
    "model_type": "bert",
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "vocab_size": 128,
    "max_position_embeddings": 64,
    "type_vocab_size": 2,
}


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
