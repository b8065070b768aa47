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
SEQ2SEQ = dict(vocab_size=128, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
               decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
               **DECODER_IDS)
VISION = dict(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
              num_attention_heads=2, intermediate_size=64)


def vision_encoder_decoder() -> T.PretrainedConfig:
    encoder = T.ViTConfig(**VISION)
    decoder = T.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=128, n_positions=64,
                           add_cross_attention=True, is_decoder=True, bos_token_id=0, eos_token_id=2, pad_token_id=1)
    config = T.VisionEncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)
    config.decoder_start_token_id, config.pad_token_id = 0, 1
    return config


# name -> (group, family, model_class, config factory)
CATALOGUE = {
    "llama": ("family", "causal_lm", "AutoModelForCausalLM", lambda: T.LlamaConfig(num_key_value_heads=1, **TEXT)),
    "bert-mlm": ("family", "masked_lm", "AutoModelForMaskedLM", lambda: T.BertConfig(**TEXT)),
    "bert-st": ("family", "feature_extraction", "AutoModel", lambda: T.BertConfig(**TEXT)),
    "roberta-cls": ("family", "sequence_classification", "AutoModelForSequenceClassification",
                    lambda: T.RobertaConfig(num_labels=3, max_position_embeddings=66, **TEXT)),
    "electra-qa": ("family", "question_answering", "AutoModelForQuestionAnswering",
                   lambda: T.ElectraConfig(embedding_size=16, **TEXT)),
    "distilbert-tok": ("family", "token_classification", "AutoModelForTokenClassification",
                       lambda: T.DistilBertConfig(dim=32, n_layers=2, n_heads=2, hidden_dim=64, vocab_size=128, num_labels=5)),
    "t5": ("family", "seq2seq", "AutoModelForSeq2SeqLM",
           lambda: T.T5Config(vocab_size=128, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                              decoder_start_token_id=0, pad_token_id=0)),
    "vit": ("family", "image_classification", "AutoModelForImageClassification", lambda: T.ViTConfig(num_labels=4, **VISION)),
    "whisper": ("family", "speech_seq2seq", "AutoModelForSpeechSeq2Seq",
                lambda: T.WhisperConfig(vocab_size=128, num_mel_bins=16, d_model=32, encoder_layers=2, decoder_layers=2,
                                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                        decoder_ffn_dim=64, max_source_positions=30, max_target_positions=32,
                                        suppress_tokens=[], begin_suppress_tokens=[], **DECODER_IDS)),
    "vit-gpt2": ("family", "vision_seq2seq", "VisionEncoderDecoderModel", vision_encoder_decoder),
    # issue 13: audio, time series, LLM embedders, rerankers
    "wav2vec2-ctc": ("family", "ctc_speech_recognition", "AutoModelForCTC",
                     lambda: T.Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                              conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 8),
                                              num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, vocab_size=32)),
    "ast": ("family", "audio_classification", "AutoModelForAudioClassification",
            lambda: T.ASTConfig(num_mel_bins=32, max_length=64, num_labels=3, **{k: v for k, v in TEXT.items() if k != "vocab_size"})),
    "patchtst": ("family", "time_series_forecasting", "PatchTSTForPrediction",
                 lambda: T.PatchTSTConfig(num_input_channels=2, context_length=32, patch_length=8, patch_stride=8,
                                          prediction_length=8, d_model=16, num_hidden_layers=1, num_attention_heads=2, ffn_dim=32)),
    "qwen3-embed": ("family", "llm_embedding", "AutoModel", lambda: T.Qwen3Config(num_key_value_heads=1, head_dim=16, **TEXT)),
    "bert-rerank": ("family", "reranker", "AutoModelForSequenceClassification", lambda: T.BertConfig(num_labels=1, **TEXT)),
    # held out: architectures no issue names
    "layoutlm": ("held_out", "token_classification", "AutoModelForTokenClassification", lambda: T.LayoutLMConfig(num_labels=3, **TEXT)),
    "distilbert": ("held_out", "sequence_classification", "AutoModelForSequenceClassification",
                   lambda: T.DistilBertConfig(dim=32, n_layers=2, n_heads=2, hidden_dim=64, vocab_size=128)),
    "albert": ("held_out", "masked_lm", "AutoModelForMaskedLM", lambda: T.AlbertConfig(embedding_size=16, **TEXT)),
    "mobilebert": ("held_out", "feature_extraction", "AutoModel",
                   lambda: T.MobileBertConfig(embedding_size=16, intra_bottleneck_size=16, true_hidden_size=16,
                                              num_feedforward_networks=1, **TEXT)),
    "opt": ("held_out", "causal_lm", "AutoModelForCausalLM",
            lambda: T.OPTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, ffn_dim=64,
                                word_embed_proj_dim=32, vocab_size=128, max_position_embeddings=64)),
    "gpt-neox": ("held_out", "causal_lm", "AutoModelForCausalLM", lambda: T.GPTNeoXConfig(**TEXT)),
    "mistral": ("held_out", "causal_lm", "AutoModelForCausalLM", lambda: T.MistralConfig(num_key_value_heads=1, **TEXT)),
    "gemma3-text": ("held_out", "causal_lm", "AutoModelForCausalLM",
                    lambda: T.Gemma3TextConfig(num_key_value_heads=1, head_dim=16, sliding_window=8, **{**TEXT, "num_hidden_layers": 6})),
    "pegasus": ("held_out", "seq2seq", "AutoModelForSeq2SeqLM", lambda: T.PegasusConfig(**SEQ2SEQ)),
    "m2m100": ("held_out", "seq2seq", "AutoModelForSeq2SeqLM", lambda: T.M2M100Config(**SEQ2SEQ)),
    "marian": ("held_out", "seq2seq", "AutoModelForSeq2SeqLM", lambda: T.MarianConfig(decoder_vocab_size=128, **SEQ2SEQ)),
    "deit": ("held_out", "image_classification", "AutoModelForImageClassification", lambda: T.DeiTConfig(num_labels=3, **VISION)),
    "convnext": ("held_out", "image_classification", "AutoModelForImageClassification",
                 lambda: T.ConvNextConfig(hidden_sizes=[8, 16], depths=[1, 2], num_stages=2, image_size=32, num_labels=3)),
    "swin": ("held_out", "image_classification", "AutoModelForImageClassification",
             lambda: T.SwinConfig(image_size=32, patch_size=4, embed_dim=8, depths=[1, 2], num_heads=[1, 2], window_size=2, num_labels=3)),
    "speech2text": ("held_out", "speech_seq2seq", "AutoModelForSpeechSeq2Seq",
                    lambda: T.Speech2TextConfig(input_feat_per_channel=16, input_channels=1, conv_channels=32,
                                                max_source_positions=64, max_target_positions=32, **{**SEQ2SEQ, "max_position_embeddings": 64})),
    "wav2vec2": ("held_out", "feature_extraction", "AutoModel",
                 lambda: T.Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                          conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 8),
                                          num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, vocab_size=32)),
    "clip": ("held_out", "feature_extraction", "AutoModel",
             lambda: T.CLIPConfig(text_config=dict(**TEXT, max_position_embeddings=40, bos_token_id=0, eos_token_id=2, pad_token_id=1), vision_config=VISION, projection_dim=16)),
    "xlnet": ("held_out", "causal_lm", "AutoModelForCausalLM",
              lambda: T.XLNetConfig(vocab_size=128, d_model=32, n_layer=2, n_head=2, d_inner=64, mem_len=4)),
    "deepseek-v3": ("held_out", "causal_lm", "AutoModelForCausalLM",
                    lambda: T.DeepseekV3Config(vocab_size=128, hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
                                               num_hidden_layers=4, first_k_dense_replace=1, n_routed_experts=4,
                                               num_experts_per_tok=2, n_group=2, topk_group=1, num_attention_heads=2,
                                               num_key_value_heads=2, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8,
                                               qk_nope_head_dim=8, v_head_dim=8)),
    "llava": ("held_out", "causal_lm", "LlavaForConditionalGeneration",
              lambda: T.LlavaConfig(vision_config=dict(model_type="clip_vision_model", projection_dim=16, **VISION),
                                    text_config=dict(model_type="llama", num_key_value_heads=1, **TEXT), image_token_index=23)),
    # unsupported on purpose: its forward requires time features no builder makes (past_values is built)
    "time-series": ("unsupported", "feature_extraction", "AutoModel",
                    lambda: T.TimeSeriesTransformerConfig(prediction_length=4, d_model=16, encoder_layers=1, decoder_layers=1,
                                                          encoder_attention_heads=2, decoder_attention_heads=2)),
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
