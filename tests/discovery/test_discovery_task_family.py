"""Task families from architecture suffix + model_type, including architectures nobody listed."""

from __future__ import annotations

from typing import Any

import pytest

from ascendbridge.discovery.task_family import classify
from ascendbridge.task_families import TASK_FAMILIES


def config_of(model_type: str, *architectures: str) -> dict[str, Any]:
    """A config.json naming `model_type` and its `architectures` (the key left out without any)."""
    return {"model_type": model_type, **({"architectures": list(architectures)} if architectures else {})}


@pytest.mark.parametrize(
    "arch, model_type, family",
    [
        ("LlamaForCausalLM", "llama", "causal_lm"),
        ("GPT2LMHeadModel", "gpt2", "causal_lm"),
        ("ZorblaxNovaForCausalLM", "zorblax_nova", "causal_lm"),  # invented: the suffix decides
        ("BertForMaskedLM", "bert", "masked_lm"),
        ("DebertaV2ForSequenceClassification", "deberta-v2", "sequence_classification"),
        ("RobertaForQuestionAnswering", "roberta", "question_answering"),
        ("ElectraForTokenClassification", "electra", "token_classification"),
        ("T5ForConditionalGeneration", "t5", "seq2seq"),
        ("MarianMTModel", "marian", "seq2seq"),  # Marian's LM class has no head suffix
        ("T5WithLMHeadModel", "t5", "seq2seq"),
        ("XLMWithLMHeadModel", "xlm", "masked_lm"),
        ("ReformerModelWithLMHead", "reformer", "causal_lm"),
        ("T5Model", "t5", "feature_extraction"),  # bare backbone
        ("BartForConditionalGeneration", "bart", "seq2seq"),
        ("M2M100ForConditionalGeneration", "m2m_100", "seq2seq"),
        ("FutureTextForConditionalGeneration", "future_text", None),  # not known encoder-decoder
        ("WhisperForConditionalGeneration", "whisper", "speech_seq2seq"),
        ("Speech2TextForConditionalGeneration", "speech_to_text", "speech_seq2seq"),
        ("VisionEncoderDecoderModel", "vision-encoder-decoder", "vision_seq2seq"),
        ("ViTForImageClassification", "vit", "image_classification"),
        ("DeiTForImageClassificationWithTeacher", "deit", "image_classification"),
        ("BertModel", "bert", "feature_extraction"),
        ("LlavaForConditionalGeneration", "llava", None),
        ("Wav2Vec2ForXVector", "wav2vec2", None),
        ("BertForMultipleChoice", "bert", None),
        # issue 13: audio, time series, LLM embedders
        ("Wav2Vec2ForCTC", "wav2vec2", "ctc_speech_recognition"),
        ("HubertForSequenceClassification", "hubert", "audio_classification"),
        ("ASTForAudioClassification", "audio-spectrogram-transformer", "audio_classification"),
        ("PatchTSTForPrediction", "patchtst", "time_series_forecasting"),
        ("TimesFmModelForPrediction", "timesfm", "time_series_forecasting"),
        ("BertForNextSentencePrediction", "bert", None),  # not a forecaster
        ("Qwen3Model", "qwen3", "llm_embedding"),
    ],
)
def test_architecture_suffixes(arch: str, model_type: str, family: str | None) -> None:
    got = classify({"architectures": [arch], "model_type": model_type})
    assert got.family == family, got.reason
    assert got.reason
    if family is not None:
        assert family in TASK_FAMILIES
        assert got.model_class == arch


def test_encoder_decoder_flag_generalises() -> None:
    got = classify(
        {"architectures": ["NewMtForConditionalGeneration"], "model_type": "new_mt", "is_encoder_decoder": True}
    )
    assert got.family == "seq2seq"


def test_pretraining_head_loads_the_backbone() -> None:
    got = classify({"architectures": ["BertForPreTraining"], "model_type": "bert"})
    assert (got.family, got.model_class) == ("feature_extraction", "AutoModel")


def test_sentence_transformers_directory_is_feature_extraction() -> None:
    got = classify({"architectures": ["BertModel"], "model_type": "bert"}, sentence_transformers=True)
    assert (got.family, got.model_class) == ("feature_extraction", "BertModel")


def test_later_architecture_can_decide() -> None:
    got = classify({"architectures": ["Wav2Vec2ForXVector", "BertForMaskedLM"], "model_type": "bert"})
    assert got.family == "masked_lm"


@pytest.mark.parametrize(
    "config, family, reason",
    [
        ({"model_type": "t5"}, "seq2seq", "encoder-decoder"),
        ({"model_type": "whisper"}, "speech_seq2seq", "encoder-decoder"),
        ({"model_type": "llama"}, None, "does not say which head"),
        ({}, None, "neither architectures nor model_type"),
    ],
)
def test_without_architectures(config: dict, family: str | None, reason: str) -> None:
    got = classify(config)
    assert got.family == family
    assert reason in got.reason


def test_unknown_head_reason_names_the_architecture() -> None:
    got = classify({"architectures": ["Wav2Vec2ForXVector"], "model_type": "wav2vec2"})
    assert "Wav2Vec2ForXVector" in got.reason and "supported" in got.reason


# --- vision families (issue 13) ---
VISION = {"model_type": "siglip_vision_model", "image_size": 32}


@pytest.mark.parametrize(
    "config, family",
    [
        (
            {
                "architectures": ["Qwen2_5_VLForConditionalGeneration"],
                "model_type": "qwen2_5_vl",
                "image_token_id": 151655,
                "vision_config": {"model_type": "qwen2_5_vl_vision"},
                "text_config": {"model_type": "qwen2_5_vl_text"},
            },
            "image_text_to_text",
        ),
        (
            {
                "architectures": ["Gemma3ForConditionalGeneration"],
                "model_type": "gemma3",
                "image_token_index": 262144,
                "vision_config": VISION,
                "text_config": {"model_type": "gemma3_text"},
            },
            "image_text_to_text",
        ),
        (
            {"architectures": ["CLIPModel"], "model_type": "clip", "vision_config": VISION, "text_config": {}},
            "zero_shot_image_classification",
        ),
        (
            {"architectures": ["SiglipModel"], "model_type": "siglip", "vision_config": VISION, "text_config": {}},
            "zero_shot_image_classification",
        ),
        ({"architectures": ["DetrForObjectDetection"], "model_type": "detr"}, "object_detection"),
        ({"architectures": ["RTDetrForObjectDetection"], "model_type": "rt_detr"}, "object_detection"),
        ({"architectures": ["YolosForObjectDetection"], "model_type": "yolos"}, "object_detection"),
        ({"architectures": ["SegformerForSemanticSegmentation"], "model_type": "segformer"}, "semantic_segmentation"),
        ({"architectures": ["DPTForDepthEstimation"], "model_type": "dpt"}, "depth_estimation"),
        ({"architectures": ["DepthAnythingForDepthEstimation"], "model_type": "depth_anything"}, "depth_estimation"),
        # a vision tower without image tokens is not a VLM: an unknown multimodal head stays refused
        (
            {"architectures": ["FutureAvForConditionalGeneration"], "model_type": "future_av", "vision_config": VISION},
            None,
        ),
    ],
)
def test_vision_families_from_architecture_and_config(config: dict, family: str | None) -> None:
    """The head class loaded is the architecture itself, whether or not a family is known."""
    got = classify(config)
    assert (got.family, got.model_class) == (family, config["architectures"][0]), got.reason
    assert family is None or family in TASK_FAMILIES


@pytest.mark.parametrize(
    "config, tag, family, model_class",
    [
        # an unknown conditional-generation head: the Hub's tag settles it, the head class is kept
        (
            config_of("future_vl", "FutureVlForConditionalGeneration"),
            "image-text-to-text",
            "image_text_to_text",
            "FutureVlForConditionalGeneration",
        ),
        # a bare backbone tagged with a task: the family's auto class loads the head from the config
        (config_of("detr", "DetrModel"), "object-detection", "object_detection", "AutoModelForObjectDetection"),
        (config_of("glpn"), "depth-estimation", "depth_estimation", "AutoModelForDepthEstimation"),
        # an explicit head wins over the tag; an unknown tag changes nothing
        (
            config_of("vit", "ViTForImageClassification"),
            "object-detection",
            "image_classification",
            "ViTForImageClassification",
        ),
        (config_of("bert", "BertModel"), "fill-in-the-blanks", "feature_extraction", "BertModel"),
    ],
)
def test_the_pipeline_tag_decides_where_the_architecture_does_not(
    config: dict, tag: str, family: str, model_class: str
) -> None:
    got = classify(config, pipeline_tag=tag)
    assert (got.family, got.model_class) == (family, model_class), got.reason
    if family != classify(config).family:
        assert f"pipeline tag is '{tag}'" in got.reason


def test_discovery_reads_the_pipeline_tag_from_the_model_card(tmp_path) -> None:
    import json

    from ascendbridge.discovery.directory import info_from_directory

    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["DetrModel"], "model_type": "detr"}))
    (tmp_path / "README.md").write_text("---\npipeline_tag: object-detection\n---\n# a detector\n")
    info = info_from_directory(tmp_path, "local/detector", "local")
    assert (info.task_family, info.model_class) == ("object_detection", "AutoModelForObjectDetection")


# --- end vision families ---
