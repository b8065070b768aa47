"""Map a config (architectures + model_type) to a task family from ascendbridge.task_families.

Works by the architecture class name's head suffix, so architectures nobody listed still land
in the right family (a new *ForCausalLM is a causal LM). What cannot be mapped gets family None
and a reason a person can act on, never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ascendbridge.task_families import TASK_FAMILIES

# Encoder-decoder text model types: their *ForConditionalGeneration is seq2seq.
TEXT_SEQ2SEQ_TYPES = frozenset(
    {
        "t5",
        "mt5",
        "umt5",
        "longt5",
        "bart",
        "mbart",
        "marian",
        "pegasus",
        "pegasus_x",
        "m2m_100",
        "nllb-moe",
        "nllb_moe",
        "blenderbot",
        "blenderbot-small",
        "led",
        "fsmt",
        "prophetnet",
        "xlm-prophetnet",
        "bigbird_pegasus",
        "plbart",
        "mvp",
        "switch_transformers",
        "encoder-decoder",
        "t5gemma",
    }
)
SPEECH_SEQ2SEQ_TYPES = frozenset({"whisper", "speech_to_text", "speech-encoder-decoder", "speecht5"})
VISION_SEQ2SEQ_TYPES = frozenset({"vision-encoder-decoder"})

# Head suffix -> family, longest suffixes first so "...ForImageClassificationWithTeacher" wins.
SUFFIX_FAMILIES: tuple[tuple[str, str], ...] = (
    ("ForAudioClassification", "audio_classification"),  # issue 13
    ("ForImageClassificationWithTeacher", "image_classification"),
    ("ForSequenceClassification", "sequence_classification"),
    ("ForTokenClassification", "token_classification"),
    ("ForImageClassification", "image_classification"),
    ("ForQuestionAnswering", "question_answering"),
    ("ForSpeechSeq2Seq", "speech_seq2seq"),
    ("ForSeq2SeqLM", "seq2seq"),
    ("ForCausalLM", "causal_lm"),
    ("LMHeadModel", "causal_lm"),  # GPT2LMHeadModel, OpenAIGPTLMHeadModel, ...
    ("ForMaskedLM", "masked_lm"),
    ("ForCTC", "ctc_speech_recognition"),  # issue 13
    ("ForPrediction", "time_series_forecasting"),  # PatchTSTForPrediction, TimesFmModelForPrediction
    # --- vision families (issue 13) ---
    ("ForZeroShotImageClassification", "zero_shot_image_classification"),
    ("ForSemanticSegmentation", "semantic_segmentation"),
    ("ForDepthEstimation", "depth_estimation"),
    ("ForObjectDetection", "object_detection"),
    ("ForImageTextToText", "image_text_to_text"),
    # --- end vision families ---
)
# Model types whose "...WithLMHead..." class is a masked LM (XLM and its derivatives).
MASKED_LM_HEAD_TYPES = frozenset({"xlm", "flaubert"})
# --- vision families (issue 13) ---
# The Hub's pipeline tag -> family, used where the architecture alone does not say which task a
# checkpoint serves (a bare *Model, or a class nobody listed). An explicit head suffix wins.
PIPELINE_TAG_FAMILIES: dict[str, str] = {
    "image-text-to-text": "image_text_to_text",
    "zero-shot-image-classification": "zero_shot_image_classification",
    "object-detection": "object_detection",
    "depth-estimation": "depth_estimation",
    # audio, time series, rerankers (issue 13)
    "audio-classification": "audio_classification",
    "time-series-forecasting": "time_series_forecasting",
    "text-ranking": "reranker",
}
IMAGE_TOKEN_KEYS = ("image_token_id", "image_token_index")


def _is_vlm(cfg: dict[str, Any]) -> bool:
    """A vision tower feeding a language model through image tokens (Qwen2.5-VL, Gemma 3, LLaVA)."""
    return isinstance(cfg.get("vision_config"), dict) and any(isinstance(cfg.get(k), int) for k in IMAGE_TOKEN_KEYS)


def _is_dual_encoder(cfg: dict[str, Any]) -> bool:
    """Separate text and vision towers scored against each other (CLIP, SigLIP): no image tokens."""
    return (
        isinstance(cfg.get("vision_config"), dict)
        and isinstance(cfg.get("text_config"), dict)
        and not any(k in cfg for k in IMAGE_TOKEN_KEYS)
    )


def _by_pipeline_tag(tag: str | None, arch: str | None, reason: str) -> Classification | None:
    family = PIPELINE_TAG_FAMILIES.get(tag or "")
    if family is None:
        return None
    return Classification(family, arch or TASK_FAMILIES[family], f"{reason}; the Hub's pipeline tag is '{tag}'")


# --- end vision families ---

# Heads with no family of their own whose checkpoints still load as the bare encoder.
BACKBONE_SUFFIXES = ("ForPreTraining",)


# --- audio, time series, LLM embedders and rerankers (issue 13) ---
# Speech encoders whose ...ForSequenceClassification head classifies audio clips, not text.
AUDIO_TYPES = frozenset(
    {
        "wav2vec2",
        "wav2vec2-conformer",
        "wav2vec2-bert",
        "hubert",
        "wavlm",
        "data2vec-audio",
        "unispeech",
        "unispeech-sat",
        "sew",
        "sew-d",
        "audio-spectrogram-transformer",
        "whisper",
    }
)
# Decoder-only LLM types: their bare ...Model is an embedder with last-token pooling.
DECODER_LLM_TYPES = frozenset(
    {
        "llama",
        "mistral",
        "qwen2",
        "qwen3",
        "qwen2_moe",
        "qwen3_moe",
        "gemma",
        "gemma2",
        "gemma3_text",
        "phi3",
        "mixtral",
        "gpt2",
        "gpt_neox",
        "falcon",
        "olmo",
        "olmo2",
        "starcoder2",
        "deepseek_v3",
        "glm",
        "glm4",
    }
)


def _num_labels(cfg: dict[str, Any]) -> int | None:
    labels = cfg.get("id2label")
    if isinstance(labels, dict) and labels:
        return len(labels)
    value = cfg.get("num_labels")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _is_decoder_llm(model_type: str, cfg: dict[str, Any]) -> bool:
    """A decoder-only language model config (its bare backbone embeds by the last token)."""
    return model_type in DECODER_LLM_TYPES or ("num_key_value_heads" in cfg and not cfg.get("is_encoder_decoder"))


def refine(
    found: Classification, model_type: str, cfg: dict[str, Any], pipeline_tag: str | None, pooling: str | None
) -> Classification:
    """Families the head suffix alone cannot tell: audio clip classifiers, rerankers (one label or the
    Hub's text-ranking tag) and LLM-backbone embedders (decoder type or last-token pooling)."""
    arch = found.model_class or ""
    if found.family == "sequence_classification":
        if model_type in AUDIO_TYPES or pipeline_tag == "audio-classification":
            return Classification("audio_classification", arch, f"{arch} on audio model_type '{model_type}'")
        if _num_labels(cfg) == 1 or pipeline_tag == "text-ranking":
            why = "one label" if _num_labels(cfg) == 1 else "Hub pipeline tag text-ranking"
            return Classification("reranker", arch, f"{arch} with {why}: a cross-encoder reranker (relevance score)")
    if found.family == "feature_extraction" and (pooling == "lasttoken" or _is_decoder_llm(model_type, cfg)):
        why = "last-token pooling" if pooling == "lasttoken" else f"decoder LLM model_type '{model_type}'"
        return Classification("llm_embedding", found.model_class, f"{found.reason}; {why}: an LLM-backbone embedder")
    return found


@dataclass(frozen=True)
class Classification:
    family: str | None
    model_class: str | None
    reason: str


def _seq2seq_family(model_type: str, cfg: dict[str, Any]) -> str | None:
    if model_type in SPEECH_SEQ2SEQ_TYPES:
        return "speech_seq2seq"
    if model_type in VISION_SEQ2SEQ_TYPES:
        return "vision_seq2seq"
    if model_type in TEXT_SEQ2SEQ_TYPES or cfg.get("is_encoder_decoder") is True:
        return "seq2seq"
    return None


def _by_architecture(arch: str, model_type: str, cfg: dict[str, Any]) -> Classification | None:
    if "WithLMHead" in arch:  # T5WithLMHeadModel, ReformerModelWithLMHead, XLMWithLMHeadModel
        family = _seq2seq_family(model_type, cfg) or (
            "masked_lm" if model_type in MASKED_LM_HEAD_TYPES else "causal_lm"
        )
        return Classification(family, arch, f"{arch}: LM head on model_type '{model_type}'")
    for suffix, family in SUFFIX_FAMILIES:
        if arch.endswith(suffix):
            return Classification(family, arch, f"architecture {arch} ends with {suffix}")
    if arch.endswith(("ForConditionalGeneration", "MTModel")):  # MarianMTModel is Marian's LM class
        seq2seq = _seq2seq_family(model_type, cfg)
        if seq2seq:
            return Classification(seq2seq, arch, f"{arch} with encoder-decoder model_type '{model_type}'")
        if _is_vlm(cfg):
            return Classification(
                "image_text_to_text",
                arch,
                f"{arch}: a vision tower and image tokens in the config (vision-language model)",
            )
        return Classification(
            None,
            arch,
            f"{arch}: conditional generation for model_type '{model_type}' "
            "(multimodal or unknown) has no supported task family",
        )
    if arch in ("VisionEncoderDecoderModel",):
        return Classification("vision_seq2seq", arch, "vision encoder-decoder")
    if arch in ("SpeechEncoderDecoderModel",):
        return Classification("speech_seq2seq", arch, "speech encoder-decoder")
    if arch in ("EncoderDecoderModel",):
        return Classification("seq2seq", arch, "text encoder-decoder")
    if arch.endswith(BACKBONE_SUFFIXES):
        return Classification(
            "feature_extraction",
            TASK_FAMILIES["feature_extraction"],
            f"{arch} is a pre-training head; its encoder is loaded with AutoModel",
        )
    if arch.endswith("Model") and "For" not in arch and _is_dual_encoder(cfg):
        return Classification(
            "zero_shot_image_classification",
            arch,
            f"{arch}: text and vision towers without image tokens (CLIP-style image-text similarity)",
        )
    if arch.endswith("Model") and "For" not in arch:
        return Classification("feature_extraction", arch, f"bare backbone {arch}")
    return None


def classify(
    cfg: dict[str, Any],
    sentence_transformers: bool = False,
    pipeline_tag: str | None = None,
    pooling: str | None = None,
) -> Classification:
    """The task family for a parsed config.json; sentence_transformers = modules.json present
    (`pooling` its pooling mode); pipeline_tag = the Hub's tag (model card), which settles bare
    backbones and unknown heads; then the families a head suffix alone cannot tell (refine)."""
    found = _classify(cfg, sentence_transformers, pipeline_tag)
    return refine(found, str(cfg.get("model_type") or ""), cfg, pipeline_tag, pooling) if found.family else found


def _classify(cfg: dict[str, Any], sentence_transformers: bool, pipeline_tag: str | None) -> Classification:
    model_type = str(cfg.get("model_type") or "")
    archs = cfg.get("architectures") or []
    if not isinstance(archs, list):
        archs = []
    archs = [a for a in archs if isinstance(a, str)]
    if sentence_transformers:
        model_class = archs[0] if archs and archs[0].endswith("Model") else TASK_FAMILIES["feature_extraction"]
        return Classification("feature_extraction", model_class, "sentence-transformers model (modules.json)")
    for arch in archs:
        found = _by_architecture(arch, model_type, cfg)
        if found is not None and found.family is None:  # an unknown conditional-generation head
            found = _by_pipeline_tag(pipeline_tag, arch, found.reason) or found
        elif found is not None and found.reason.startswith("bare backbone"):  # the tag names the head to load
            found = _by_pipeline_tag(pipeline_tag, None, found.reason) or found
        if found is not None:
            return found
    tagged = _by_pipeline_tag(
        pipeline_tag,
        archs[0] if archs else None,
        f"architecture {archs[0]} names no head" if archs else "no architectures in config.json",
    )
    if tagged is not None:
        return tagged
    if archs:
        return Classification(
            None,
            archs[0],
            f"architecture {archs[0]} has no supported task family (supported: {', '.join(TASK_FAMILIES)})",
        )
    family = _seq2seq_family(model_type, cfg)
    if family:
        return Classification(
            family,
            TASK_FAMILIES[family],
            f"no architectures in config.json; model_type '{model_type}' is encoder-decoder",
        )
    if not model_type:
        return Classification(None, None, "config.json names neither architectures nor model_type")
    return Classification(
        None, None, f"config.json has no architectures; model_type '{model_type}' alone does not say which head to load"
    )
