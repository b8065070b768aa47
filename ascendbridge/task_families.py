"""Canonical task-family names shared by discovery (framework side) and the adaptation runtime.

The runtime (ab_runtime/families.py) keeps its own copy of these names because
it runs inside adaptation environments without the framework; a test keeps the two in sync.
"""

from __future__ import annotations

TASK_FAMILIES: dict[str, str] = {
    # family -> default transformers auto class
    "causal_lm": "AutoModelForCausalLM",
    "masked_lm": "AutoModelForMaskedLM",
    "feature_extraction": "AutoModel",  # encoders / sentence embeddings (pooling if ST model)
    "sequence_classification": "AutoModelForSequenceClassification",
    "question_answering": "AutoModelForQuestionAnswering",
    "token_classification": "AutoModelForTokenClassification",
    "seq2seq": "AutoModelForSeq2SeqLM",  # T5 / BART / Marian style
    "image_classification": "AutoModelForImageClassification",
    "speech_seq2seq": "AutoModelForSpeechSeq2Seq",  # Whisper style
    "vision_seq2seq": "AutoModelForVision2Seq",  # VisionEncoderDecoder style
    # audio, time series, LLM embedders and rerankers (issue 13)
    "ctc_speech_recognition": "AutoModelForCTC",  # wav2vec2 / HuBERT style, greedy CTC transcripts
    "audio_classification": "AutoModelForAudioClassification",  # AST, wav2vec2 / HuBERT heads
    "time_series_forecasting": "AutoModelForTimeSeriesPrediction",  # PatchTST, TimesFM
    "llm_embedding": "AutoModel",  # decoder LLM backbone as an embedder (Qwen3-Embedding): last-token pooling
    "reranker": "AutoModelForSequenceClassification",  # cross-encoder with one relevance score
    # --- vision and vision-language families (issue 13) ---
    "image_text_to_text": "AutoModelForImageTextToText",  # VLMs: Qwen2.5-VL, Gemma 3, LLaVA style
    "zero_shot_image_classification": "AutoModelForZeroShotImageClassification",  # CLIP / SigLIP: image-text similarity
    "object_detection": "AutoModelForObjectDetection",  # DETR, RT-DETR, YOLOS
    "semantic_segmentation": "AutoModelForSemanticSegmentation",  # Segformer, DPT-seg, BEiT-seg
    "depth_estimation": "AutoModelForDepthEstimation",  # DPT, Depth Anything, GLPN
    # --- end vision families ---
}
