"""From a board record with discovery's ModelInfo to an AdaptationSpec."""

from __future__ import annotations

from typing import Any

import pytest

from adaptation.spec_builder import AdaptationRefused, build_spec, dry_run_max_layers
from ascendbridge.board import BoardStore
from ascendbridge.board.records import Registration
from ascendbridge.discovery.model_info import ModelInfo
from bench.support.local_model import put_discovered
from tests.adaptation.helpers import REMOTE_CODE, UNKNOWN_FAMILY, discovered_info


def test_encoder_with_sentence_transformers_pooling(board: BoardStore) -> None:
    config = {"model_type": "bert", "max_position_embeddings": 512, "num_hidden_layers": 6}
    found = dict(parameter_count=22_713_216, has_weights=True, sentence_transformers_pooling="mean")
    model_id = "sentence-transformers/all-MiniLM-L6-v2"
    info = discovered_info(
        model_id, "BertModel", "feature_extraction", config, "local", local_dir="/models/minilm", **found
    )
    spec = build_spec(put_discovered(board, info))
    assert spec.name == "sentence-transformers__all-minilm-l6-v2"
    assert (spec.task_family, spec.model_class, spec.architecture) == ("feature_extraction", "BertModel", "BertModel")
    assert spec.model.source == "local" and spec.model.path == "/models/minilm" and spec.model.has_weights
    assert spec.sentence_transformers_pooling == "mean"
    assert spec.inputs.input_names == ["input_ids", "attention_mask"] and spec.inputs.seq_len == 32
    assert spec.dry_run_max_layers is None and not spec.trust_remote_code


def test_a_70b_config_gets_a_reduced_dry_run_depth(board: BoardStore) -> None:
    config = {"model_type": "llama", "num_hidden_layers": 80, "max_position_embeddings": 131072}
    counts = dict(parameter_count=70_553_706_496, num_layers=80)
    info = discovered_info("meta-llama/Llama-3.1-70B", "LlamaForCausalLM", "causal_lm", config, **counts)
    spec = build_spec(put_discovered(board, info))
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
    config = {"model_type": "gpt2", "n_layer": 12, "n_positions": 16}
    info = discovered_info("org/gpt2-ish", "GPT2LMHeadModel", "causal_lm", config, parameter_count=124_000_000)
    rec = put_discovered(board, info)
    monkeypatch.setenv("ASCENDBRIDGE_DRY_RUN_MAX_BYTES", str(100 * 1024**2))
    spec = build_spec(rec)
    assert spec.dry_run_max_layers == 2 and spec.inputs.seq_len == 16
    monkeypatch.setenv("ASCENDBRIDGE_DRY_RUN_MAX_BYTES", "lots")
    with pytest.raises(ValueError, match="^bad adaptation setting dry_run_max_bytes: Input should be a valid integer"):
        build_spec(rec)


def test_speech_and_vision_inputs_come_from_the_config(board: BoardStore) -> None:
    config = {"model_type": "whisper", "num_mel_bins": 80, "max_source_positions": 1500}
    whisper = discovered_info("openai/whisper-tiny", "WhisperForConditionalGeneration", "speech_seq2seq", config)
    spec = build_spec(put_discovered(board, whisper))
    assert spec.inputs.input_names == ["input_features", "decoder_input_ids"]
    assert (spec.inputs.num_mel_bins, spec.inputs.audio_frames) == (80, 3000)
    config = {"model_type": "vit", "image_size": 224}
    vit = discovered_info("google/vit-tiny", "ViTForImageClassification", "image_classification", config)
    spec = build_spec(put_discovered(board, vit))
    assert spec.inputs.input_names == ["pixel_values"] and spec.inputs.image_size == 224


def test_unknown_family_is_refused_with_discoverys_reason(board: BoardStore) -> None:
    with pytest.raises(AdaptationRefused) as refused:
        build_spec(put_discovered(board, UNKNOWN_FAMILY))
    assert refused.value.diagnosis["rule"] == "unknown_task_family"
    assert "OddForSomething has no supported task family" in refused.value.diagnosis["summary"]


def test_remote_code_needs_the_boards_permission(board: BoardStore) -> None:
    with pytest.raises(AdaptationRefused) as refused:
        build_spec(put_discovered(board, REMOTE_CODE))
    assert refused.value.diagnosis["rule"] == "remote_code_not_allowed"
    allowed = REMOTE_CODE.model_copy(update={"model_id": "org/custom2"})
    assert build_spec(put_discovered(board, allowed, allow_remote_code=True)).trust_remote_code


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
    info = discovered_info(f"org/{config['model_type']}", "X", family, config)
    spec = build_spec(put_discovered(board, info))
    assert (spec.task_family, spec.inputs.input_names, spec.inputs.image_size) == (family, inputs, image_size)
    assert spec.dependencies == {"pillow": ">=10"}  # image processors need PIL; transformers does not install it


# --- end vision families ---


def test_a_registered_proxy_goes_into_the_spec_and_its_gate_checks_it_ran(board: BoardStore) -> None:
    """`register_model --depth 4` of a 28-layer model: the spec names the proxy (the package's README
    says it), the dry-run budget is left to the proxy's 4 layers, and the adaptation gate passes a demo
    that built it, fails one that ran the full model, and one that ran a proxy the spec has not."""
    from adaptation.gate import Report, check_proxy
    from ascendbridge.package.spec import ProxyDepth

    board.register_models([Registration(model_id="Qwen/Qwen3-0.6B", proxy_depth=4)])
    config = {"model_type": "qwen3", "num_hidden_layers": 28, "max_position_embeddings": 40960}
    info = discovered_info("Qwen/Qwen3-0.6B", "Qwen3ForCausalLM", "causal_lm", config, parameter_count=596_049_920)
    spec = build_spec(put_discovered(board, info))
    assert spec.model.proxy == ProxyDepth(layers=4, of=28) and spec.model.proxy.label() == "proxy: 4 of 28 layers"
    assert spec.dry_run_max_layers is None  # the proxy's 4 layers fit the dry-run budget

    def checked(proxy: Any) -> tuple[bool, str]:
        report = Report("a", "cpu")
        check_proxy(report, spec, proxy)
        (check,) = report.checks
        return check.passed, check.detail

    built = {"layers": 4, "of": 28, "stacks": {"num_hidden_layers": [4, 28]}}
    assert checked(built) == (True, "proxy: 4 of 28 layers: built {'num_hidden_layers': [4, 28]}")
    assert checked(None) == (False, "expected proxy: 4 of 28 layers, ran None")
    assert not checked({**built, "stacks": {"num_hidden_layers": [28, 28]}})[0]
    full = spec.model_copy(update={"model": spec.model.model_copy(update={"proxy": None})})
    report = Report("a", "cpu")
    check_proxy(report, full, built)
    assert not report.checks[0].passed and "ran a proxy the spec has not" in report.checks[0].detail
