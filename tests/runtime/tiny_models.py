"""Write tiny config-only model directories with transformers' real config classes.

Run inside the torch test environment: `python tiny_models.py OUT_DIR` writes OUT_DIR/<name>/
(config.json) and prints a JSON manifest [{name, family, model_class, group, path}]. `family`
entries cover each task family once; `held_out` entries are architectures no issue names, used to
check that the runtime generalises (each must run or fail with a clear diagnosis).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import transformers as T

# the transformer body every tiny text, vision and audio config shares
BODY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
TEXT = dict(vocab_size=128, **BODY)
TOKEN_IDS = dict(pad_token_id=1, bos_token_id=0, eos_token_id=2)
DECODER_IDS = dict(decoder_start_token_id=0, **TOKEN_IDS)
ENCODER_DECODER = dict(encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2)
FFN = dict(encoder_ffn_dim=64, decoder_ffn_dim=64)
SEQ2SEQ = dict(vocab_size=128, d_model=32, max_position_embeddings=64, **ENCODER_DECODER, **FFN, **DECODER_IDS)
LABELS = dict(num_labels=3, id2label={0: "cat", 1: "dog", 2: "car"}, label2id={"cat": 0, "dog": 1, "car": 2})
VISION = dict(image_size=32, patch_size=8, num_channels=3, **BODY)
WAV2VEC2_CONV = dict(conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 8), num_conv_pos_embeddings=16)
# DeepSeek-V3's mixture of experts (first layer dense) and multi-head latent attention, at toy sizes
MOE = dict(moe_intermediate_size=16, first_k_dense_replace=1, n_routed_experts=4, num_experts_per_tok=2)
MLA = dict(q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8)
# Gemma 3's grouped attention with a sliding window
GEMMA3_TEXT = dict(num_key_value_heads=1, head_dim=16, sliding_window=8)
# the depth head DPT and Depth Anything share
NECK = dict(neck_hidden_sizes=[8, 16, 32, 32], fusion_hidden_size=16)
# one-layer encoder and decoder with two heads (DETR, time series)
SHALLOW = dict(encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2)


def wav2vec2() -> T.PretrainedConfig:
    return T.Wav2Vec2Config(num_conv_pos_embedding_groups=2, vocab_size=32, **WAV2VEC2_CONV, **BODY)


def clip() -> T.PretrainedConfig:
    text = dict(max_position_embeddings=40, **TOKEN_IDS, **TEXT)
    return T.CLIPConfig(text_config=text, vision_config=VISION, projection_dim=16)


def llava() -> T.PretrainedConfig:
    return T.LlavaConfig(
        vision_config=dict(model_type="clip_vision_model", projection_dim=16, **VISION),
        text_config=dict(model_type="llama", num_key_value_heads=1, **TEXT),
        image_token_index=23,
    )


def t5() -> T.PretrainedConfig:
    ids = dict(decoder_start_token_id=0, pad_token_id=0)  # T5 starts decoding with its pad token
    return T.T5Config(vocab_size=128, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2, **ids)


def whisper() -> T.PretrainedConfig:
    audio = dict(num_mel_bins=16, max_source_positions=30, max_target_positions=32)
    return T.WhisperConfig(
        vocab_size=128,
        d_model=32,
        suppress_tokens=[],
        begin_suppress_tokens=[],
        **audio,
        **ENCODER_DECODER,
        **FFN,
        **DECODER_IDS,
    )


def patchtst() -> T.PretrainedConfig:
    series = dict(num_input_channels=2, context_length=32, patch_length=8, patch_stride=8, prediction_length=8)
    return T.PatchTSTConfig(d_model=16, num_hidden_layers=1, num_attention_heads=2, ffn_dim=32, **series)


def opt() -> T.PretrainedConfig:
    body = {k: v for k, v in TEXT.items() if k != "intermediate_size"}  # OPT calls it ffn_dim
    return T.OPTConfig(ffn_dim=64, word_embed_proj_dim=32, max_position_embeddings=64, **body)


def qwen2_5_vl() -> T.PretrainedConfig:
    rope = dict(rope_type="default", mrope_section=[2, 3, 3], rope_theta=10000.0)
    text = dict(model_type="qwen2_5_vl_text", num_key_value_heads=1, max_position_embeddings=128, **TEXT)
    windows = dict(patch_size=4, spatial_merge_size=2, temporal_patch_size=2, window_size=16, fullatt_block_indexes=[1])
    vision = dict(
        model_type="qwen2_5_vl_vision",
        depth=2,
        hidden_size=32,
        num_heads=2,
        intermediate_size=64,
        out_hidden_size=32,
        **windows,
    )
    tokens = dict(image_token_id=120, video_token_id=121, vision_start_token_id=122, vision_end_token_id=123)
    return T.Qwen2_5_VLConfig(text_config=dict(rope_parameters=rope, **text), vision_config=vision, **tokens)


def resnet(model_type: str, hidden_sizes: list[int], out_features: list[str]) -> dict[str, object]:
    """A basic-block ResNet backbone with one block a stage (DETR, RT-DETR)."""
    stages = dict(hidden_sizes=hidden_sizes, depths=[1] * len(hidden_sizes), out_features=out_features)
    return dict(model_type=model_type, embedding_size=8, layer_type="basic", **stages)


def rt_detr() -> T.PretrainedConfig:
    backbone = resnet("rt_detr_resnet", [8, 16, 32, 64], ["stage2", "stage3", "stage4"])
    encoder = dict(
        encoder_hidden_dim=16, encoder_in_channels=[16, 32, 64], encoder_ffn_dim=32, encoder_attention_heads=2
    )
    decoder = dict(decoder_layers=1, decoder_attention_heads=2, decoder_ffn_dim=32, decoder_in_channels=[16, 16, 16])
    return T.RTDetrConfig(
        backbone_config=backbone,
        use_pretrained_backbone=False,
        d_model=16,
        num_queries=10,
        decoder_n_points=2,
        anchor_image_size=None,
        **encoder,
        **decoder,
        **LABELS,
    )


def segformer() -> T.PretrainedConfig:
    stages = dict(depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16], patch_sizes=[7, 3], strides=[4, 2])
    heads = dict(num_attention_heads=[1, 2], mlp_ratios=[2, 2], decoder_hidden_size=16)
    return T.SegformerConfig(num_encoder_blocks=2, image_size=32, **stages, **heads, **LABELS)


def depth_anything() -> T.PretrainedConfig:
    dinov2 = dict(model_type="dinov2", image_size=28, patch_size=14, **{**BODY, "num_hidden_layers": 4})
    backbone = dict(out_indices=[1, 2, 3, 4], reshape_hidden_states=False, **dinov2)
    return T.DepthAnythingConfig(backbone_config=backbone, patch_size=14, reassemble_hidden_size=32, **NECK)


def vision_encoder_decoder() -> T.PretrainedConfig:
    encoder = T.ViTConfig(**VISION)
    # from_encoder_decoder_configs makes it a decoder with cross-attention
    decoder = T.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=128, n_positions=64, **TOKEN_IDS)
    config = T.VisionEncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)
    config.decoder_start_token_id, config.pad_token_id = 0, 1
    return config


# name -> (group, family, model_class)
ROLES = {
    "llama": ("family", "causal_lm", "AutoModelForCausalLM"),
    "bert-mlm": ("family", "masked_lm", "AutoModelForMaskedLM"),
    "bert-st": ("family", "feature_extraction", "AutoModel"),
    "roberta-cls": ("family", "sequence_classification", "AutoModelForSequenceClassification"),
    "electra-qa": ("family", "question_answering", "AutoModelForQuestionAnswering"),
    "distilbert-tok": ("family", "token_classification", "AutoModelForTokenClassification"),
    "t5": ("family", "seq2seq", "AutoModelForSeq2SeqLM"),
    "vit": ("family", "image_classification", "AutoModelForImageClassification"),
    "whisper": ("family", "speech_seq2seq", "AutoModelForSpeechSeq2Seq"),
    "vit-gpt2": ("family", "vision_seq2seq", "VisionEncoderDecoderModel"),
    # issue 13: audio, time series, LLM embedders, rerankers
    "wav2vec2-ctc": ("family", "ctc_speech_recognition", "AutoModelForCTC"),
    "ast": ("family", "audio_classification", "AutoModelForAudioClassification"),
    "patchtst": ("family", "time_series_forecasting", "PatchTSTForPrediction"),
    "qwen3-embed": ("family", "llm_embedding", "AutoModel"),
    "bert-rerank": ("family", "reranker", "AutoModelForSequenceClassification"),
    # held out: architectures no issue names
    "layoutlm": ("held_out", "token_classification", "AutoModelForTokenClassification"),
    "distilbert": ("held_out", "sequence_classification", "AutoModelForSequenceClassification"),
    "albert": ("held_out", "masked_lm", "AutoModelForMaskedLM"),
    "mobilebert": ("held_out", "feature_extraction", "AutoModel"),
    "opt": ("held_out", "causal_lm", "AutoModelForCausalLM"),
    "gpt-neox": ("held_out", "causal_lm", "AutoModelForCausalLM"),
    "mistral": ("held_out", "causal_lm", "AutoModelForCausalLM"),
    "gemma3-text": ("held_out", "causal_lm", "AutoModelForCausalLM"),
    "pegasus": ("held_out", "seq2seq", "AutoModelForSeq2SeqLM"),
    "m2m100": ("held_out", "seq2seq", "AutoModelForSeq2SeqLM"),
    "marian": ("held_out", "seq2seq", "AutoModelForSeq2SeqLM"),
    "deit": ("held_out", "image_classification", "AutoModelForImageClassification"),
    "convnext": ("held_out", "image_classification", "AutoModelForImageClassification"),
    "swin": ("held_out", "image_classification", "AutoModelForImageClassification"),
    "speech2text": ("held_out", "speech_seq2seq", "AutoModelForSpeechSeq2Seq"),
    "wav2vec2": ("held_out", "feature_extraction", "AutoModel"),
    "clip": ("held_out", "feature_extraction", "AutoModel"),
    "xlnet": ("held_out", "causal_lm", "AutoModelForCausalLM"),
    "deepseek-v3": ("held_out", "causal_lm", "AutoModelForCausalLM"),
    "llava": ("held_out", "causal_lm", "LlavaForConditionalGeneration"),
    # --- vision families (issue 13) ---
    "qwen2.5-vl": ("family", "image_text_to_text", "Qwen2_5_VLForConditionalGeneration"),
    "gemma3-vlm": ("held_out", "image_text_to_text", "Gemma3ForConditionalGeneration"),
    "llava-vlm": ("held_out", "image_text_to_text", "LlavaForConditionalGeneration"),  # no layout: text-only fallback
    "siglip": ("family", "zero_shot_image_classification", "SiglipModel"),
    "clip-zero-shot": ("held_out", "zero_shot_image_classification", "CLIPModel"),
    "detr": ("family", "object_detection", "DetrForObjectDetection"),
    "rt-detr": ("held_out", "object_detection", "RTDetrForObjectDetection"),
    "yolos": ("held_out", "object_detection", "YolosForObjectDetection"),
    "segformer": ("family", "semantic_segmentation", "SegformerForSemanticSegmentation"),
    "dpt": ("family", "depth_estimation", "DPTForDepthEstimation"),
    "depth-anything": ("held_out", "depth_estimation", "DepthAnythingForDepthEstimation"),
    # --- end vision families ---
    # unsupported on purpose: its forward requires time features no builder makes (past_values is built)
    "time-series": ("unsupported", "feature_extraction", "AutoModel"),
}

# name -> config factory
CONFIGS = {
    "llama": lambda: T.LlamaConfig(num_key_value_heads=1, **TEXT),
    "bert-mlm": lambda: T.BertConfig(**TEXT),
    "bert-st": lambda: T.BertConfig(**TEXT),
    "roberta-cls": lambda: T.RobertaConfig(num_labels=3, max_position_embeddings=66, **TEXT),
    "electra-qa": lambda: T.ElectraConfig(embedding_size=16, **TEXT),
    "distilbert-tok": lambda: T.DistilBertConfig(
        dim=32, n_layers=2, n_heads=2, hidden_dim=64, vocab_size=128, num_labels=5
    ),
    "t5": t5,
    "vit": lambda: T.ViTConfig(num_labels=4, **VISION),
    "whisper": whisper,
    "vit-gpt2": vision_encoder_decoder,
    # issue 13: audio, time series, LLM embedders, rerankers
    "wav2vec2-ctc": wav2vec2,
    "ast": lambda: T.ASTConfig(num_mel_bins=32, max_length=64, num_labels=3, **BODY),
    "patchtst": patchtst,
    "qwen3-embed": lambda: T.Qwen3Config(num_key_value_heads=1, head_dim=16, **TEXT),
    "bert-rerank": lambda: T.BertConfig(num_labels=1, **TEXT),
    # held out: architectures no issue names
    "layoutlm": lambda: T.LayoutLMConfig(num_labels=3, **TEXT),
    "distilbert": lambda: T.DistilBertConfig(dim=32, n_layers=2, n_heads=2, hidden_dim=64, vocab_size=128),
    "albert": lambda: T.AlbertConfig(embedding_size=16, **TEXT),
    "mobilebert": lambda: T.MobileBertConfig(
        embedding_size=16, intra_bottleneck_size=16, true_hidden_size=16, num_feedforward_networks=1, **TEXT
    ),
    "opt": opt,
    "gpt-neox": lambda: T.GPTNeoXConfig(**TEXT),
    "mistral": lambda: T.MistralConfig(num_key_value_heads=1, **TEXT),
    "gemma3-text": lambda: T.Gemma3TextConfig(**GEMMA3_TEXT, **{**TEXT, "num_hidden_layers": 6}),
    "pegasus": lambda: T.PegasusConfig(**SEQ2SEQ),
    "m2m100": lambda: T.M2M100Config(**SEQ2SEQ),
    "marian": lambda: T.MarianConfig(decoder_vocab_size=128, **SEQ2SEQ),
    "deit": lambda: T.DeiTConfig(num_labels=3, **VISION),
    "convnext": lambda: T.ConvNextConfig(
        hidden_sizes=[8, 16], depths=[1, 2], num_stages=2, image_size=32, num_labels=3
    ),
    "swin": lambda: T.SwinConfig(
        image_size=32, patch_size=4, embed_dim=8, depths=[1, 2], num_heads=[1, 2], window_size=2, num_labels=3
    ),
    "speech2text": lambda: T.Speech2TextConfig(
        input_feat_per_channel=16,
        input_channels=1,
        conv_channels=32,
        max_source_positions=64,
        max_target_positions=32,
        **SEQ2SEQ,
    ),
    "wav2vec2": wav2vec2,
    "clip": clip,
    "xlnet": lambda: T.XLNetConfig(vocab_size=128, d_model=32, n_layer=2, n_head=2, d_inner=64, mem_len=4),
    "deepseek-v3": lambda: T.DeepseekV3Config(
        num_key_value_heads=2, n_group=2, topk_group=1, **MOE, **MLA, **{**TEXT, "num_hidden_layers": 4}
    ),
    "llava": llava,
    # --- vision families (issue 13) ---
    "qwen2.5-vl": qwen2_5_vl,
    "gemma3-vlm": lambda: T.Gemma3Config(
        text_config=dict(model_type="gemma3_text", max_position_embeddings=128, **GEMMA3_TEXT, **TEXT),
        vision_config=dict(model_type="siglip_vision_model", **VISION),
        mm_tokens_per_image=4,
        image_token_index=120,
        boi_token_index=121,
        eoi_token_index=122,
    ),
    "llava-vlm": llava,
    "siglip": lambda: T.SiglipConfig(text_config=dict(**TEXT, max_position_embeddings=40), vision_config=VISION),
    "clip-zero-shot": clip,
    "detr": lambda: T.DetrConfig(
        backbone_config=resnet("resnet", [8, 16], ["stage2"]),
        use_timm_backbone=False,
        use_pretrained_backbone=False,
        d_model=32,
        num_queries=8,
        **SHALLOW,
        **FFN,
        **LABELS,
    ),
    "rt-detr": rt_detr,
    "yolos": lambda: T.YolosConfig(**{**VISION, "image_size": [32, 32]}, num_detection_tokens=5, **LABELS),
    "segformer": segformer,
    "dpt": lambda: T.DPTConfig(
        backbone_out_indices=[0, 1, 2, 3], head_in_index=-1, **NECK, **{**VISION, "num_hidden_layers": 4}
    ),
    "depth-anything": depth_anything,
    # --- end vision families ---
    # unsupported on purpose: its forward requires time features no builder makes (past_values is built)
    "time-series": lambda: T.TimeSeriesTransformerConfig(prediction_length=4, d_model=16, **SHALLOW),
}


def main(out: Path) -> None:
    manifest = []
    for name, (group, family, model_class) in ROLES.items():
        path = out / name
        CONFIGS[name]().save_pretrained(path)
        manifest.append({"name": name, "group": group, "family": family, "model_class": model_class, "path": str(path)})
    print(json.dumps(manifest))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
