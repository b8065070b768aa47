"""From a board record with discovery's ModelInfo to an AdaptationSpec."""

from __future__ import annotations

from typing import Any

import pytest

from adaptation.spec_builder import AdaptationRefused, build_spec, dry_run_max_layers
from ascendbridge.board import BoardStore
from ascendbridge.board.records import ModelRecord, Registration
from ascendbridge.discovery.model_info import ModelInfo


def record(
    board: BoardStore, model_id: str, info: ModelInfo, allow_remote_code: bool = False, **fields: Any
) -> ModelRecord:
    board.register_models(
        [Registration(model_id=model_id, source=info.source, path=info.local_dir, allow_remote_code=allow_remote_code)]
    )
    columns = {
        "architecture": (info.architectures or [None])[0],
        "model_type": info.model_type,
        "task_family": info.task_family,
        "parameter_count": info.parameter_count,
        **fields,
    }
    return board.update_model_metadata(model_id, columns, info.model_dump(mode="json"))


def test_encoder_with_sentence_transformers_pooling(board: BoardStore) -> None:
    info = ModelInfo(
        model_id="sentence-transformers/all-MiniLM-L6-v2",
        source="local",
        local_dir="/models/minilm",
        config={"model_type": "bert", "max_position_embeddings": 512, "num_hidden_layers": 6},
        architectures=["BertModel"],
        model_type="bert",
        task_family="feature_extraction",
        model_class="BertModel",
        parameter_count=22_713_216,
        has_weights=True,
        sentence_transformers_pooling="mean",
    )
    spec = build_spec(record(board, info.model_id, info))
    assert spec.name == "sentence-transformers__all-minilm-l6-v2"
    assert (spec.task_family, spec.model_class, spec.architecture) == ("feature_extraction", "BertModel", "BertModel")
    assert spec.model.source == "local" and spec.model.path == "/models/minilm" and spec.model.has_weights
    assert spec.sentence_transformers_pooling == "mean"
    assert spec.inputs.input_names == ["input_ids", "attention_mask"] and spec.inputs.seq_len == 32
    assert spec.dry_run_max_layers is None and not spec.trust_remote_code


def test_a_70b_config_gets_a_reduced_dry_run_depth(board: BoardStore) -> None:
    info = ModelInfo(
        model_id="meta-llama/Llama-3.1-70B",
        source="huggingface",
        config={"model_type": "llama", "num_hidden_layers": 80, "max_position_embeddings": 131072},
        architectures=["LlamaForCausalLM"],
        model_type="llama",
        task_family="causal_lm",
        model_class="LlamaForCausalLM",
        parameter_count=70_553_706_496,
        num_layers=80,
    )
    spec = build_spec(record(board, info.model_id, info))
    assert spec.task_family == "causal_lm" and spec.model_class == "LlamaForCausalLM"
    assert spec.dry_run_max_layers is not None and 1 <= spec.dry_run_max_layers <= 2
    assert not spec.model.has_weights  # discovery did not see weights (config only)


def test_dry_run_depth_arithmetic(monkeypatch: pytest.MonkeyPatch) -> None:
    gib = 1024**3
    assert dry_run_max_layers(100_000_000, 12, 2 * gib) is None  # 400 MB fits
    assert dry_run_max_layers(None, 12, 2 * gib) is None  # nothing to go by
    assert dry_run_max_layers(1_000_000_000, 10, 2 * gib) == 5  # 4 GB at 400 MB per layer
    assert dry_run_max_layers(70_000_000_000, 80, 2 * gib) == 1


def test_budget_comes_from_the_environment(board: BoardStore, monkeypatch: pytest.MonkeyPatch) -> None:
    info = ModelInfo(
        model_id="org/gpt2-ish",
        source="huggingface",
        config={"n_layer": 12, "n_positions": 16},
        architectures=["GPT2LMHeadModel"],
        model_type="gpt2",
        task_family="causal_lm",
        model_class="GPT2LMHeadModel",
        parameter_count=124_000_000,
    )
    rec = record(board, info.model_id, info)
    monkeypatch.setenv("ASCENDBRIDGE_DRY_RUN_MAX_BYTES", str(100 * 1024**2))
    spec = build_spec(rec)
    assert spec.dry_run_max_layers == 2 and spec.inputs.seq_len == 16
    monkeypatch.setenv("ASCENDBRIDGE_DRY_RUN_MAX_BYTES", "lots")
    with pytest.raises(ValueError, match="^bad adaptation setting dry_run_max_bytes: Input should be a valid integer"):
        build_spec(rec)


def test_speech_and_vision_inputs_come_from_the_config(board: BoardStore) -> None:
    whisper = ModelInfo(
        model_id="openai/whisper-tiny",
        source="huggingface",
        config={"model_type": "whisper", "num_mel_bins": 80, "max_source_positions": 1500},
        architectures=["WhisperForConditionalGeneration"],
        model_type="whisper",
        task_family="speech_seq2seq",
        model_class="WhisperForConditionalGeneration",
    )
    spec = build_spec(record(board, whisper.model_id, whisper))
    assert spec.inputs.input_names == ["input_features", "decoder_input_ids"]
    assert (spec.inputs.num_mel_bins, spec.inputs.audio_frames) == (80, 3000)
    vit = ModelInfo(
        model_id="google/vit-tiny",
        source="huggingface",
        config={"model_type": "vit", "image_size": 224},
        architectures=["ViTForImageClassification"],
        model_type="vit",
        task_family="image_classification",
        model_class="ViTForImageClassification",
    )
    spec = build_spec(record(board, vit.model_id, vit))
    assert spec.inputs.input_names == ["pixel_values"] and spec.inputs.image_size == 224


def test_unknown_family_is_refused_with_discoverys_reason(board: BoardStore) -> None:
    info = ModelInfo(
        model_id="org/odd",
        source="huggingface",
        config={"model_type": "odd"},
        architectures=["OddForSomething"],
        model_type="odd",
        task_family=None,
        task_family_reason="architecture OddForSomething has no supported task family",
    )
    with pytest.raises(AdaptationRefused) as refused:
        build_spec(record(board, info.model_id, info))
    assert refused.value.diagnosis["rule"] == "unknown_task_family"
    assert "OddForSomething has no supported task family" in refused.value.diagnosis["summary"]


def test_remote_code_needs_the_boards_permission(board: BoardStore) -> None:
    info = ModelInfo(
        model_id="org/custom",
        source="huggingface",
        config={"model_type": "custom"},
        architectures=["CustomForCausalLM"],
        model_type="custom",
        task_family="causal_lm",
        model_class="CustomForCausalLM",
        needs_remote_code=True,
    )
    with pytest.raises(AdaptationRefused) as refused:
        build_spec(record(board, info.model_id, info))
    assert refused.value.diagnosis["rule"] == "remote_code_not_allowed"
    allowed = info.model_copy(update={"model_id": "org/custom2"})
    assert build_spec(record(board, allowed.model_id, allowed, allow_remote_code=True)).trust_remote_code


def test_model_without_metadata_falls_back_to_the_family_auto_class(board: BoardStore) -> None:
    board.register_models([Registration(model_id="org/plain", source="huggingface")])
    rec = board.update_model_metadata("org/plain", {"task_family": "masked_lm"}, {})
    spec = build_spec(rec)
    assert spec.model_class == "AutoModelForMaskedLM" and spec.task_family == "masked_lm"


def test_corrupt_metadata_is_a_diagnosis_not_a_crash(board: BoardStore) -> None:
    board.register_models([Registration(model_id="org/broken", source="huggingface")])
    rec = board.update_model_metadata("org/broken", {"task_family": "causal_lm"}, {"model_id": 5})
    with pytest.raises(AdaptationRefused) as refused:
        build_spec(rec)
    assert refused.value.diagnosis["rule"] == "corrupt_metadata"


def test_hf_cache_models_point_at_the_cache_not_the_snapshot(board: BoardStore) -> None:
    info = ModelInfo(
        model_id="org/cached",
        source="hf-cache",
        local_dir="/cache/models--org--cached/snapshots/abc",
        config={"model_type": "bert"},
        architectures=["BertForMaskedLM"],
        model_type="bert",
        task_family="masked_lm",
        model_class="BertForMaskedLM",
        has_weights=True,
    )
    board.register_models([Registration(model_id=info.model_id, source="hf-cache", path="/cache")])
    rec = board.update_model_metadata(info.model_id, {"task_family": "masked_lm"}, info.model_dump(mode="json"))
    spec = build_spec(rec)
    assert (spec.model.source, spec.model.path, spec.model.has_weights) == ("hf-cache", "/cache", True)


# --- vision families (issue 13) ---
@pytest.mark.parametrize(
    "config, family, inputs, image_size",
    [
        (
            {"model_type": "siglip", "vision_config": {"image_size": 224}, "text_config": {}},
            "zero_shot_image_classification",
            ["input_ids", "attention_mask", "pixel_values"],
            224,
        ),
        (
            {"model_type": "depth_anything", "backbone_config": {"image_size": 518}},
            "depth_estimation",
            ["pixel_values"],
            518,
        ),
        ({"model_type": "rt_detr"}, "object_detection", ["pixel_values"], None),  # no size: the runtime's default
        (
            {"model_type": "qwen2_5_vl", "vision_config": {"patch_size": 14}},
            "image_text_to_text",
            ["input_ids", "attention_mask", "pixel_values"],
            None,
        ),  # the VLM's image layout sizes its own image
    ],
)
def test_vision_families_size_their_images_from_the_vision_config(
    board: BoardStore, config: dict, family: str, inputs: list, image_size: Any
) -> None:
    info = ModelInfo(
        model_id=f"org/{config['model_type']}",
        source="huggingface",
        config=config,
        architectures=["X"],
        model_type=config["model_type"],
        task_family=family,
        model_class="X",
    )
    spec = build_spec(record(board, info.model_id, info))
    assert (spec.task_family, spec.inputs.input_names, spec.inputs.image_size) == (family, inputs, image_size)
    assert spec.dependencies == {"pillow": ">=10"}  # image processors need PIL; transformers does not install it


# --- end vision families ---
