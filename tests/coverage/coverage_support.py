"""The families of issue 13 on tiny configs, prepared as the pipeline prepares them: real discovery
of each config directory, a board record, the built-in adapter's spec, the rendered package.

Model code runs in the shared torch test environment (bench/support/torch_env.py); packages are
real generator output with accuracy_run.py, so the benchmark's run and gate work on them as is.
Bert's num_labels comes from id2label, as in real checkpoints (one label: a reranker).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from adaptation.spec_builder import build_spec
from ascendbridge.board import BoardStore
from ascendbridge.discovery.discover import discover
from ascendbridge.package.generator import render_adaptation
from ascendbridge.package.spec import AdaptationSpec
from ascendbridge.stage_api import StageContext
from bench.support.local_model import put_discovered, stage_context
from benchmark.render import render_accuracy_run

HERE = Path(__file__).resolve().parent
TEXT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=128)
SPEECH = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    conv_dim=[16, 16],
    conv_stride=[5, 4],
    conv_kernel=[10, 8],
    num_conv_pos_embeddings=16,
    num_conv_pos_embedding_groups=2,
    vocab_size=12,
    pad_token_id=0,
)
MOE = dict(num_key_value_heads=1, num_experts=4, num_experts_per_tok=2, head_dim=16)
CTC_VOCAB = {
    "<pad>": 0,
    "<s>": 1,
    "</s>": 2,
    "<unk>": 3,
    "|": 4,
    "A": 5,
    "B": 6,
    "C": 7,
    "D": 8,
    "E": 9,
    "F": 10,
    "G": 11,
}
# name -> (family discovery must find, architecture, config.json beyond architectures; transformers
# fills every other field with its config class's default, as for any checkpoint)
MODELS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "wav2vec2-ctc": ("ctc_speech_recognition", "Wav2Vec2ForCTC", {"model_type": "wav2vec2", **SPEECH}),
    "hubert-ctc": ("ctc_speech_recognition", "HubertForCTC", {"model_type": "hubert", **SPEECH}),
    "ast": (
        "audio_classification",
        "ASTForAudioClassification",
        {
            "model_type": "audio-spectrogram-transformer",
            "num_mel_bins": 32,
            "max_length": 64,
            "id2label": {"0": "speech", "1": "music", "2": "noise"},
            **TEXT,
        },
    ),
    "patchtst": (
        "time_series_forecasting",
        "PatchTSTForPrediction",
        {
            "model_type": "patchtst",
            "num_input_channels": 2,
            "context_length": 32,
            "patch_length": 8,
            "patch_stride": 8,
            "prediction_length": 8,
            "d_model": 16,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "ffn_dim": 32,
        },
    ),
    "timesfm": (
        "time_series_forecasting",
        "TimesFmModelForPrediction",
        {
            "model_type": "timesfm",
            "patch_length": 8,
            "context_length": 32,
            "horizon_length": 8,
            "num_hidden_layers": 1,
            "hidden_size": 32,
            "intermediate_size": 32,
            "head_dim": 16,
            "num_attention_heads": 2,
        },
    ),
    "qwen3-embed": (
        "llm_embedding",
        "Qwen3Model",
        {"model_type": "qwen3", "num_key_value_heads": 1, "head_dim": 16, **TEXT},
    ),
    "bert-reranker": (
        "reranker",
        "BertForSequenceClassification",
        {"model_type": "bert", "id2label": {"0": "LABEL_0"}, **TEXT},
    ),
    "qwen3-moe": (
        "causal_lm",
        "Qwen3MoeForCausalLM",
        {"model_type": "qwen3_moe", "moe_intermediate_size": 16, **MOE, **TEXT},
    ),
    "mamba": (
        "causal_lm",
        "MambaForCausalLM",
        {
            "model_type": "mamba",
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "vocab_size": 128,
            "state_size": 4,
            "expand": 2,
            "conv_kernel": 4,
        },
    ),
    "jamba": (
        "causal_lm",
        "JambaForCausalLM",
        {
            "model_type": "jamba",
            "attn_layer_period": 2,
            "attn_layer_offset": 1,
            "expert_layer_period": 2,
            "expert_layer_offset": 1,
            "mamba_d_state": 4,
            "mamba_d_conv": 4,
            "mamba_expand": 2,
            "mamba_dt_rank": 8,
            **MOE,
            **{**TEXT, "num_hidden_layers": 4},
        },
    ),
}
# The same models as (config.json, family), the shape bench/coverage.py reads test tables in.
COVERAGE_MODELS = {
    f"coverage/{name}": ({"architectures": [cls], **config}, family) for name, (family, cls, config) in MODELS.items()
}
# Small inputs keep the suite fast: 0.1 s of 16 kHz audio; the rest from the configs.
RECIPE_OVERRIDES: dict[str, dict[str, Any]] = {
    "ctc_speech_recognition": {"audio_frames": 1600},
    "audio_classification": {"audio_frames": 1600},
}


def write_models(out: Path) -> dict[str, dict[str, Any]]:
    """name -> {family, model_class, path}: config-only model directories (a CTC model also
    ships vocab.json, as wav2vec2 checkpoints do, so its transcript shows characters)."""
    manifest = {}
    for name, (family, model_class, config) in MODELS.items():
        path = out / name
        path.mkdir(parents=True)
        (path / "config.json").write_text(json.dumps({"architectures": [model_class], **config}))
        if family == "ctc_speech_recognition":
            (path / "vocab.json").write_text(json.dumps(CTC_VOCAB))
        manifest[name] = {"family": family, "model_class": model_class, "path": str(path)}
    return manifest


def register(board: BoardStore, name: str, path: str) -> StageContext:
    """Discover a local model directory and put it on the board, as the Discovery stage does."""
    model_id = f"tiny/{name}"
    put_discovered(board, discover(model_id, "local", path))
    return stage_context(board, model_id, "adaptation")


def prepare(ctx: StageContext, dtype: str | None = None) -> AdaptationSpec:
    """The built-in adapter's spec for the record (small audio; `dtype` as the target), rendered
    with accuracy_run.py; no lock: the torch test env runs the package."""
    spec = build_spec(ctx.model)
    for key, value in RECIPE_OVERRIDES.get(spec.task_family, {}).items():
        setattr(spec.inputs, key, value)
    if dtype:
        spec.dtype.target = dtype
    render_adaptation(spec, ctx.adaptation_dir)
    render_accuracy_run(spec, ctx.adaptation_dir)
    return spec
