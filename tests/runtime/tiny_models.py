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

TEXT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=128)
DECODER_IDS = dict(pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=0)
SEQ2SEQ = dict(
    vocab_size=128,
    d_model=32,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=2,
    decoder_attention_heads=2,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    max_position_embeddings=64,
    **DECODER_IDS,
)
LABELS = dict(num_labels=3, id2label={0: "cat", 1: "dog", 2: "car"}, label2id={"cat": 0, "dog": 1, "car": 2})
VISION = dict(
    image_size=32,
    patch_size=8,
    num_channels=3,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
)


def vision_encoder_decoder() -> T.PretrainedConfig:
    encoder = T.ViTConfig(**VISION)
    decoder = T.GPT2Config(
        n_embd=32,
        n_layer=2,
        n_head=2,
        vocab_size=128,
        n_positions=64,
        add_cross_attention=True,
        is_decoder=True,
        bos_token_id=0,
        eos_token_id=2,
        pad_token_id=1,
    )
    config = T.VisionEncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)
    config.decoder_start_token_id, config.pad_token_id = 0, 1
    return config


# name -> (group, family, model_class, config factory)
CATALOGUE = {
    "llama": ("family", "causal_lm", "AutoModelForCausalLM", lambda: T.LlamaConfig(num_key_value_heads=1, **TEXT)),
    "bert-mlm": ("family", "masked_lm", "AutoModelForMaskedLM", lambda: T.BertConfig(**TEXT)),
    "bert-st": ("family", "feature_extraction", "AutoModel", lambda: T.BertConfig(**TEXT)),
    "roberta-cls": (
        "family",
        "sequence_classification",
        "AutoModelForSequenceClassification",
        lambda: T.RobertaConfig(num_labels=3, max_position_embeddings=66, **TEXT),
    ),
    "electra-qa": (
        "family",
        "question_answering",
        "AutoModelForQuestionAnswering",
        lambda: T.ElectraConfig(embedding_size=16, **TEXT),
    ),
    "distilbert-tok": (
        "family",
        "token_classification",
        "AutoModelForTokenClassification",
        lambda: T.DistilBertConfig(dim=32, n_layers=2, n_heads=2, hidden_dim=64, vocab_size=128, num_labels=5),
    ),
    "t5": (
        "family",
        "seq2seq",
        "AutoModelForSeq2SeqLM",
        lambda: T.T5Config(
            vocab_size=128,
            d_model=32,
            d_kv=16,
            d_ff=64,
            num_layers=2,
            num_heads=2,
            decoder_start_token_id=0,
            pad_token_id=0,
        ),
    ),
    "vit": (
        "family",
        "image_classification",
        "AutoModelForImageClassification",
        lambda: T.ViTConfig(num_labels=4, **VISION),
    ),
    "whisper": (
        "family",
        "speech_seq2seq",
        "AutoModelForSpeechSeq2Seq",
        lambda: T.WhisperConfig(
            vocab_size=128,
            num_mel_bins=16,
            d_model=32,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            max_source_positions=30,
            max_target_positions=32,
            suppress_tokens=[],
            begin_suppress_tokens=[],
            **DECODER_IDS,
        ),
    ),
    "vit-gpt2": ("family", "vision_seq2seq", "VisionEncoderDecoderModel", vision_encoder_decoder),
    # issue 13: audio, time series, LLM embedders, rerankers
    "wav2vec2-ctc": (
        "family",
        "ctc_speech_recognition",
        "AutoModelForCTC",
        lambda: T.Wav2Vec2Config(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            conv_dim=(16, 16),
            conv_stride=(5, 4),
            conv_kernel=(10, 8),
            num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=2,
            vocab_size=32,
        ),
    ),
    "ast": (
        "family",
        "audio_classification",
        "AutoModelForAudioClassification",
        lambda: T.ASTConfig(
            num_mel_bins=32, max_length=64, num_labels=3, **{k: v for k, v in TEXT.items() if k != "vocab_size"}
        ),
    ),
    "patchtst": (
        "family",
        "time_series_forecasting",
        "PatchTSTForPrediction",
        lambda: T.PatchTSTConfig(
            num_input_channels=2,
            context_length=32,
            patch_length=8,
            patch_stride=8,
            prediction_length=8,
            d_model=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            ffn_dim=32,
        ),
    ),
    "qwen3-embed": (
        "family",
        "llm_embedding",
        "AutoModel",
        lambda: T.Qwen3Config(num_key_value_heads=1, head_dim=16, **TEXT),
    ),
    "bert-rerank": (
        "family",
        "reranker",
        "AutoModelForSequenceClassification",
        lambda: T.BertConfig(num_labels=1, **TEXT),
    ),
    # held out: architectures no issue names
    "layoutlm": (
        "held_out",
        "token_classification",
        "AutoModelForTokenClassification",
        lambda: T.LayoutLMConfig(num_labels=3, **TEXT),
    ),
    "distilbert": (
        "held_out",
        "sequence_classification",
        "AutoModelForSequenceClassification",
        lambda: T.DistilBertConfig(dim=32, n_layers=2, n_heads=2, hidden_dim=64, vocab_size=128),
    ),
    "albert": ("held_out", "masked_lm", "AutoModelForMaskedLM", lambda: T.AlbertConfig(embedding_size=16, **TEXT)),
    "mobilebert": (
        "held_out",
        "feature_extraction",
        "AutoModel",
        lambda: T.MobileBertConfig(
            embedding_size=16, intra_bottleneck_size=16, true_hidden_size=16, num_feedforward_networks=1, **TEXT
        ),
    ),
    "opt": (
        "held_out",
        "causal_lm",
        "AutoModelForCausalLM",
        lambda: T.OPTConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            ffn_dim=64,
            word_embed_proj_dim=32,
            vocab_size=128,
            max_position_embeddings=64,
        ),
    ),
    "gpt-neox": ("held_out", "causal_lm", "AutoModelForCausalLM", lambda: T.GPTNeoXConfig(**TEXT)),
    "mistral": (
        "held_out",
        "causal_lm",
        "AutoModelForCausalLM",
        lambda: T.MistralConfig(num_key_value_heads=1, **TEXT),
    ),
    "gemma3-text": (
        "held_out",
        "causal_lm",
        "AutoModelForCausalLM",
        lambda: T.Gemma3TextConfig(
            num_key_value_heads=1, head_dim=16, sliding_window=8, **{**TEXT, "num_hidden_layers": 6}
        ),
    ),
    "pegasus": ("held_out", "seq2seq", "AutoModelForSeq2SeqLM", lambda: T.PegasusConfig(**SEQ2SEQ)),
    "m2m100": ("held_out", "seq2seq", "AutoModelForSeq2SeqLM", lambda: T.M2M100Config(**SEQ2SEQ)),
    "marian": (
        "held_out",
        "seq2seq",
        "AutoModelForSeq2SeqLM",
        lambda: T.MarianConfig(decoder_vocab_size=128, **SEQ2SEQ),
    ),
    "deit": (
        "held_out",
        "image_classification",
        "AutoModelForImageClassification",
        lambda: T.DeiTConfig(num_labels=3, **VISION),
    ),
    "convnext": (
        "held_out",
        "image_classification",
        "AutoModelForImageClassification",
        lambda: T.ConvNextConfig(hidden_sizes=[8, 16], depths=[1, 2], num_stages=2, image_size=32, num_labels=3),
    ),
    "swin": (
        "held_out",
        "image_classification",
        "AutoModelForImageClassification",
        lambda: T.SwinConfig(
            image_size=32, patch_size=4, embed_dim=8, depths=[1, 2], num_heads=[1, 2], window_size=2, num_labels=3
        ),
    ),
    "speech2text": (
        "held_out",
        "speech_seq2seq",
        "AutoModelForSpeechSeq2Seq",
        lambda: T.Speech2TextConfig(
            input_feat_per_channel=16,
            input_channels=1,
            conv_channels=32,
            max_source_positions=64,
            max_target_positions=32,
            **{**SEQ2SEQ, "max_position_embeddings": 64},
        ),
    ),
    "wav2vec2": (
        "held_out",
        "feature_extraction",
        "AutoModel",
        lambda: T.Wav2Vec2Config(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            conv_dim=(16, 16),
            conv_stride=(5, 4),
            conv_kernel=(10, 8),
            num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=2,
            vocab_size=32,
        ),
    ),
    "clip": (
        "held_out",
        "feature_extraction",
        "AutoModel",
        lambda: T.CLIPConfig(
            text_config=dict(**TEXT, max_position_embeddings=40, bos_token_id=0, eos_token_id=2, pad_token_id=1),
            vision_config=VISION,
            projection_dim=16,
        ),
    ),
    "xlnet": (
        "held_out",
        "causal_lm",
        "AutoModelForCausalLM",
        lambda: T.XLNetConfig(vocab_size=128, d_model=32, n_layer=2, n_head=2, d_inner=64, mem_len=4),
    ),
    "deepseek-v3": (
        "held_out",
        "causal_lm",
        "AutoModelForCausalLM",
        lambda: T.DeepseekV3Config(
            vocab_size=128,
            hidden_size=32,
            intermediate_size=64,
            moe_intermediate_size=16,
            num_hidden_layers=4,
            first_k_dense_replace=1,
            n_routed_experts=4,
            num_experts_per_tok=2,
            n_group=2,
            topk_group=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            q_lora_rank=16,
            kv_lora_rank=16,
            qk_rope_head_dim=8,
            qk_nope_head_dim=8,
            v_head_dim=8,
        ),
    ),
    "llava": (
        "held_out",
        "causal_lm",
        "LlavaForConditionalGeneration",
        lambda: T.LlavaConfig(
            vision_config=dict(model_type="clip_vision_model", projection_dim=16, **VISION),
            text_config=dict(model_type="llama", num_key_value_heads=1, **TEXT),
            image_token_index=23,
        ),
    ),
    # --- vision families (issue 13) ---
    "qwen2.5-vl": (
        "family",
        "image_text_to_text",
        "Qwen2_5_VLForConditionalGeneration",
        lambda: T.Qwen2_5_VLConfig(
            text_config=dict(
                model_type="qwen2_5_vl_text",
                num_key_value_heads=1,
                max_position_embeddings=128,
                rope_parameters=dict(rope_type="default", mrope_section=[2, 3, 3], rope_theta=10000.0),
                **TEXT,
            ),
            vision_config=dict(
                model_type="qwen2_5_vl_vision",
                depth=2,
                hidden_size=32,
                num_heads=2,
                intermediate_size=64,
                patch_size=4,
                spatial_merge_size=2,
                temporal_patch_size=2,
                out_hidden_size=32,
                window_size=16,
                fullatt_block_indexes=[1],
            ),
            image_token_id=120,
            video_token_id=121,
            vision_start_token_id=122,
            vision_end_token_id=123,
        ),
    ),
    "gemma3-vlm": (
        "held_out",
        "image_text_to_text",
        "Gemma3ForConditionalGeneration",
        lambda: T.Gemma3Config(
            text_config=dict(
                model_type="gemma3_text",
                num_key_value_heads=1,
                head_dim=16,
                sliding_window=8,
                max_position_embeddings=128,
                **TEXT,
            ),
            vision_config=dict(model_type="siglip_vision_model", **VISION),
            mm_tokens_per_image=4,
            image_token_index=120,
            boi_token_index=121,
            eoi_token_index=122,
        ),
    ),
    "llava-vlm": (
        "held_out",
        "image_text_to_text",
        "LlavaForConditionalGeneration",  # no layout: text-only fallback
        lambda: T.LlavaConfig(
            vision_config=dict(model_type="clip_vision_model", projection_dim=16, **VISION),
            text_config=dict(model_type="llama", num_key_value_heads=1, **TEXT),
            image_token_index=23,
        ),
    ),
    "siglip": (
        "family",
        "zero_shot_image_classification",
        "SiglipModel",
        lambda: T.SiglipConfig(text_config=dict(**TEXT, max_position_embeddings=40), vision_config=VISION),
    ),
    "clip-zero-shot": (
        "held_out",
        "zero_shot_image_classification",
        "CLIPModel",
        lambda: T.CLIPConfig(
            text_config=dict(**TEXT, max_position_embeddings=40, bos_token_id=0, eos_token_id=2, pad_token_id=1),
            vision_config=VISION,
            projection_dim=16,
        ),
    ),
    "detr": (
        "family",
        "object_detection",
        "DetrForObjectDetection",
        lambda: T.DetrConfig(
            use_timm_backbone=False,
            use_pretrained_backbone=False,
            backbone_config=dict(
                model_type="resnet",
                embedding_size=8,
                hidden_sizes=[8, 16],
                depths=[1, 1],
                layer_type="basic",
                out_features=["stage2"],
            ),
            d_model=32,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            num_queries=8,
            **LABELS,
        ),
    ),
    "rt-detr": (
        "held_out",
        "object_detection",
        "RTDetrForObjectDetection",
        lambda: T.RTDetrConfig(
            backbone_config=dict(
                model_type="rt_detr_resnet",
                embedding_size=8,
                hidden_sizes=[8, 16, 32, 64],
                depths=[1, 1, 1, 1],
                layer_type="basic",
                out_features=["stage2", "stage3", "stage4"],
            ),
            use_pretrained_backbone=False,
            encoder_hidden_dim=16,
            encoder_in_channels=[16, 32, 64],
            encoder_ffn_dim=32,
            encoder_attention_heads=2,
            d_model=16,
            decoder_layers=1,
            decoder_attention_heads=2,
            decoder_ffn_dim=32,
            num_queries=10,
            decoder_n_points=2,
            decoder_in_channels=[16, 16, 16],
            anchor_image_size=None,
            **LABELS,
        ),
    ),
    "yolos": (
        "held_out",
        "object_detection",
        "YolosForObjectDetection",
        lambda: T.YolosConfig(**{**VISION, "image_size": [32, 32]}, num_detection_tokens=5, **LABELS),
    ),
    "segformer": (
        "family",
        "semantic_segmentation",
        "SegformerForSemanticSegmentation",
        lambda: T.SegformerConfig(
            num_encoder_blocks=2,
            depths=[1, 1],
            sr_ratios=[2, 1],
            hidden_sizes=[8, 16],
            patch_sizes=[7, 3],
            strides=[4, 2],
            num_attention_heads=[1, 2],
            mlp_ratios=[2, 2],
            decoder_hidden_size=16,
            image_size=32,
            **LABELS,
        ),
    ),
    "dpt": (
        "family",
        "depth_estimation",
        "DPTForDepthEstimation",
        lambda: T.DPTConfig(
            **{**VISION, "num_hidden_layers": 4},
            backbone_out_indices=[0, 1, 2, 3],
            neck_hidden_sizes=[8, 16, 32, 32],
            fusion_hidden_size=16,
            head_in_index=-1,
        ),
    ),
    "depth-anything": (
        "held_out",
        "depth_estimation",
        "DepthAnythingForDepthEstimation",
        lambda: T.DepthAnythingConfig(
            backbone_config=dict(
                model_type="dinov2",
                hidden_size=32,
                num_hidden_layers=4,
                num_attention_heads=2,
                intermediate_size=64,
                image_size=28,
                patch_size=14,
                out_indices=[1, 2, 3, 4],
                reshape_hidden_states=False,
            ),
            patch_size=14,
            reassemble_hidden_size=32,
            neck_hidden_sizes=[8, 16, 32, 32],
            fusion_hidden_size=16,
        ),
    ),
    # --- end vision families ---
    # unsupported on purpose: its forward requires time features no builder makes (past_values is built)
    "time-series": (
        "unsupported",
        "feature_extraction",
        "AutoModel",
        lambda: T.TimeSeriesTransformerConfig(
            prediction_length=4,
            d_model=16,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
        ),
    ),
}


def main(out: Path) -> None:
    manifest = []
    for name, (group, family, model_class, factory) in CATALOGUE.items():
        path = out / name
        factory().save_pretrained(path)
        manifest.append({"name": name, "group": group, "family": family, "model_class": model_class, "path": str(path)})
    print(json.dumps(manifest))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
