"""Task-family registry: which inputs a family drives and how its result reads to a person.

Names mirror ascendbridge/task_families.py (a framework test keeps them equal); this copy
exists because adaptations run without the framework. Inputs are built by ab_runtime.inputs from
the config and forward signature, so a family only adds what the model's main input does not
imply (e.g. decoder_input_ids for encoder-decoders).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from . import vision_tasks
from .errors import UnsupportedModel
from .inputs import Signature, build_model_inputs, routing_top_k
from .moe import routing_outputs
from .outputs import named_outputs as flatten_outputs
from .spec import InputRecipe

TASK_FAMILIES: dict[str, str] = {
    "causal_lm": "AutoModelForCausalLM",
    "masked_lm": "AutoModelForMaskedLM",
    "feature_extraction": "AutoModel",
    "sequence_classification": "AutoModelForSequenceClassification",
    "question_answering": "AutoModelForQuestionAnswering",
    "token_classification": "AutoModelForTokenClassification",
    "seq2seq": "AutoModelForSeq2SeqLM",
    "image_classification": "AutoModelForImageClassification",
    "speech_seq2seq": "AutoModelForSpeechSeq2Seq",
    "vision_seq2seq": "AutoModelForVision2Seq",
    # audio, time series, LLM embedders and rerankers (issue 13)
    "ctc_speech_recognition": "AutoModelForCTC",
    "audio_classification": "AutoModelForAudioClassification",
    "time_series_forecasting": "AutoModelForTimeSeriesPrediction",
    "llm_embedding": "AutoModel",
    "reranker": "AutoModelForSequenceClassification",
    # --- vision and vision-language families (issue 13) ---
    "image_text_to_text": "AutoModelForImageTextToText",
    "zero_shot_image_classification": "AutoModelForZeroShotImageClassification",
    "object_detection": "AutoModelForObjectDetection",
    "semantic_segmentation": "AutoModelForSemanticSegmentation",
    "depth_estimation": "AutoModelForDepthEstimation",
    # --- end vision families ---
}

Summary = Callable[[dict[str, torch.Tensor], Any], str]
Derive = Callable[[dict[str, torch.Tensor], Any], dict[str, torch.Tensor]]
# (model, config, recipe, float dtype, accepted forward names) -> inputs, or None for the generic path
InputBuilder = Callable[
    [torch.nn.Module, Any, InputRecipe, torch.dtype, frozenset[str]], dict[str, torch.Tensor] | None
]


def _first(outputs: dict[str, torch.Tensor], *names: str) -> torch.Tensor | None:
    return next((outputs[n] for n in names if n in outputs), None)


def _fallback(outputs: dict[str, torch.Tensor]) -> str:
    name, value = next(iter(outputs.items()))
    return f"{name} shape {list(value.shape)}"


def top_tokens(outputs: dict[str, torch.Tensor], config: Any) -> str:
    logits = _first(outputs, "logits")
    if logits is None or logits.dim() < 2:
        return _fallback(outputs)
    ids = logits[0, -1].float().topk(min(5, logits.shape[-1])).indices.tolist()
    routes = [v[0, 0].tolist() for n, v in outputs.items() if n.startswith("routing.") and v.dim() == 3]
    moe = f"; experts of the first token per MoE layer: {routes}" if routes else ""
    return f"top token ids at the last position: {ids}{moe}"


def _label(config: Any, index: int) -> str:
    labels = getattr(config, "id2label", None) or {}
    return f"{index} ({labels.get(index, labels.get(str(index), '?'))})"


def predicted_label(outputs: dict[str, torch.Tensor], config: Any) -> str:
    logits = _first(outputs, "logits")
    if logits is None:
        return _fallback(outputs)
    return f"predicted label: {_label(config, int(logits[0].argmax(-1).reshape(-1)[0]))}"


def token_labels(outputs: dict[str, torch.Tensor], config: Any) -> str:
    logits = _first(outputs, "logits")
    if logits is None or logits.dim() != 3:
        return _fallback(outputs)
    return f"labels of the first tokens: {logits[0, :5].argmax(-1).tolist()}"


def answer_span(outputs: dict[str, torch.Tensor], config: Any) -> str:
    start, end = _first(outputs, "start_logits"), _first(outputs, "end_logits")
    if start is None or end is None:
        return _fallback(outputs)
    return f"answer span: tokens {int(start[0].argmax())}..{int(end[0].argmax())}"


def embedding_norm(outputs: dict[str, torch.Tensor], config: Any) -> str:
    pooled = _first(outputs, "sentence_embedding", "pooler_output", "image_embeds", "text_embeds")
    if pooled is not None:
        return f"embedding dim {pooled.shape[-1]}, L2 norm {float(pooled[0].float().norm()):.4f}"
    hidden = _first(outputs, "last_hidden_state")
    if hidden is None:
        return _fallback(outputs)
    return f"hidden states {list(hidden.shape)}, mean token norm {float(hidden[0].float().norm(dim=-1).mean()):.4f}"


# --- summaries of the audio, time-series, embedder and reranker families (issue 13) ---


def _ctc_vocabulary(config: Any) -> dict[int, str]:
    """id -> token from the vocab.json the model ships next to its config (CTC tokenizers' file)."""
    import json
    from pathlib import Path

    path = Path(str(getattr(config, "_name_or_path", "") or "")) / "vocab.json"
    try:
        vocab = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        return {}
    return {int(i): str(t) for t, i in vocab.items() if isinstance(i, int)} if isinstance(vocab, dict) else {}


def ctc_transcript(outputs: dict[str, torch.Tensor], config: Any) -> str:
    """Greedy CTC decoding of the first item: argmax per frame, repeats collapsed, blanks removed."""
    logits = _first(outputs, "logits")
    if logits is None or logits.dim() != 3:
        return _fallback(outputs)
    blank = getattr(config, "pad_token_id", None)
    blank = 0 if blank is None else int(blank)
    frames = logits[0].argmax(-1).tolist()
    ids = [t for i, t in enumerate(frames) if t != blank and (i == 0 or t != frames[i - 1])]
    shown = f"{ids[:16]}{' ...' if len(ids) > 16 else ''}"
    vocab = _ctc_vocabulary(config)
    special = {t for t, token in vocab.items() if token.startswith("<") and token.endswith(">")}
    text = "".join(vocab.get(t, "?") for t in ids if t not in special).replace("|", " ") if vocab else None
    chars = f", characters {text[:40]!r}" if text is not None else ""
    return f"greedy CTC transcript ({len(frames)} frames, blank {blank}): {len(ids)} tokens {shown}{chars}"


def forecast(outputs: dict[str, torch.Tensor], config: Any) -> str:
    values = _first(outputs, "prediction_outputs", "mean_predictions", "sequences")
    if values is None or values.dim() < 2:
        return _fallback(outputs)
    series = values[0] if values.dim() == 2 else values[0, :, 0]
    channels = f", {values.shape[-1]} channels (first shown)" if values.dim() == 3 else ""
    first = ", ".join(f"{float(v):.4f}" for v in series[:3].float())
    return f"forecast horizon {values.shape[1]} steps{channels}: first values [{first}]"


def llm_embedding(outputs: dict[str, torch.Tensor], config: Any) -> str:
    pooled = _first(outputs, "sentence_embedding")
    if pooled is None:
        return _fallback(outputs)
    vectors = pooled.float()
    line = f"last-token embedding dim {vectors.shape[-1]}, L2 norm {float(vectors[0].norm()):.4f}"
    if vectors.shape[0] > 1:
        line += (
            f", cosine(first, second) {float(torch.nn.functional.cosine_similarity(vectors[0], vectors[1], dim=0)):.4f}"
        )
    return line


def rerank_scores(outputs: dict[str, torch.Tensor], config: Any) -> str:
    logits = _first(outputs, "logits")
    if logits is None or logits.dim() != 2 or logits.shape[-1] != 1:
        return _fallback(outputs)
    return "relevance scores (one per query-document pair): " + ", ".join(f"{float(v):.4f}" for v in logits[:, 0])


def pool(hidden: torch.Tensor, mask: torch.Tensor | None, mode: str) -> torch.Tensor:
    """sentence-transformers pooling over tokens: mean (mask-weighted), cls or max."""
    if mode == "cls":
        return hidden[:, 0]
    if mode == "lasttoken":  # decoder embedders (Qwen3-Embedding): the last real token, left or right padding
        if mask is None or bool(mask[:, -1].all()):
            return hidden[:, -1]
        last = mask.long().sum(dim=1) - 1
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    weights = mask if mask is not None else torch.ones(hidden.shape[:2], device=hidden.device)
    weights = weights.unsqueeze(-1).to(hidden.dtype)
    if mode == "max":
        return hidden.masked_fill(weights == 0, float("-inf")).max(dim=1).values
    if mode == "mean":
        return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
    raise UnsupportedModel(f"unknown sentence-transformers pooling '{mode}' (expected mean, cls, max or lasttoken)")


@dataclass(frozen=True)
class Family:
    name: str
    auto_class: str
    summary: Summary
    extra_inputs: tuple[str, ...] = ()
    pools: bool = False  # adds a sentence_embedding when the spec names a pooling mode
    default_pooling: str | None = None  # pooling when the spec names none (LLM embedders: last token)
    # Outputs kept when present, any of them (forecasters name their forecast differently);
    # accuracy_outputs below requires every one it names.
    kept_outputs: tuple[str, ...] = ()
    # The outputs a user checks (compared by the benchmark, shown by the demo); () keeps every one.
    accuracy_outputs: tuple[str, ...] = ()
    derive: Derive | None = None  # task results computed from the forward (scores, masks)
    input_builder: InputBuilder | None = None  # a family-specific input path (VLM image + text)
    input_note: Callable[[Any], str] | None = None  # which input path runs, for the progress lines
    generates: bool = False  # the demo also generates a few tokens greedily

    def build_inputs(
        self, model: torch.nn.Module, config: Any, recipe: InputRecipe, seed: int
    ) -> dict[str, torch.Tensor]:
        """Seeded inputs for the model's forward (on CPU; the caller moves them)."""
        if seed != recipe.seed:
            recipe = replace(recipe, seed=seed)
        if self.input_builder is not None:
            float_dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
            special = self.input_builder(model, config, recipe, float_dtype, Signature.of(model).accepted)
            if special is not None:
                return special
        return build_model_inputs(model, config, recipe, self.extra_inputs)

    def describe_inputs(self, config: Any) -> str | None:
        return self.input_note(config) if self.input_note is not None else None

    def named_outputs(
        self,
        outputs: Any,
        inputs: dict[str, torch.Tensor],
        pooling: str | None = None,
        normalize: bool = False,
        config: Any = None,
    ) -> dict[str, torch.Tensor]:
        """The forward's tensors by name, plus the sentence-transformers head when the spec has one:
        Pooling (`pooling`) then Normalize (`normalize`), as modules.json chains them, so the
        sentence_embedding equals what sentence-transformers' encode() returns. A family that
        names its accuracy outputs keeps only those (and what `derive` computes from them). With
        the model's config, MoE router logits also give routing decisions (routing_outputs)."""
        named = flatten_outputs(outputs)
        pooling = pooling or self.default_pooling
        if self.pools and pooling and "last_hidden_state" in named:
            pooled = pool(named["last_hidden_state"], inputs.get("attention_mask"), pooling)
            named["sentence_embedding"] = torch.nn.functional.normalize(pooled, p=2, dim=-1) if normalize else pooled
        top_k = routing_top_k(config) if config is not None else None
        if top_k and any(n.startswith("router_logits") for n in named):
            named = routing_outputs(named, inputs, top_k)
        if self.kept_outputs:
            kept = {n: v for n, v in named.items() if n in self.kept_outputs}
            if not kept:
                raise UnsupportedModel(
                    f"the forward returned none of the {self.name} outputs "
                    f"({', '.join(self.kept_outputs)}); it returned {', '.join(named) or 'nothing'}"
                )
            named = kept
        if self.accuracy_outputs:
            missing = [n for n in self.accuracy_outputs if n not in named]
            if missing:
                raise UnsupportedModel(
                    f"the forward returned no {', '.join(missing)} (task family {self.name} "
                    f"compares {', '.join(self.accuracy_outputs)})"
                )
            named = {n: named[n] for n in self.accuracy_outputs}
        if self.derive is not None:
            named.update(self.derive(named, config))
        if not named:
            raise UnsupportedModel("the forward returned no tensors")
        return named


# --- vision and vision-language families (issue 13) ---
VISION_FAMILIES = (
    Family(
        "image_text_to_text",
        TASK_FAMILIES["image_text_to_text"],
        vision_tasks.next_token_summary,
        accuracy_outputs=("logits",),
        input_builder=vision_tasks.vlm_input_builder,
        input_note=vision_tasks.vlm_input_note,
        generates=True,
    ),
    Family(
        "zero_shot_image_classification",
        TASK_FAMILIES["zero_shot_image_classification"],
        vision_tasks.similarity_summary,
        ("pixel_values",),
        accuracy_outputs=("logits_per_image", "logits_per_text", "image_embeds", "text_embeds"),
    ),
    Family(
        "object_detection",
        TASK_FAMILIES["object_detection"],
        vision_tasks.detection_summary,
        ("pixel_values",),
        accuracy_outputs=("logits", "pred_boxes"),
        derive=vision_tasks.derive_detections,
    ),
    Family(
        "semantic_segmentation",
        TASK_FAMILIES["semantic_segmentation"],
        vision_tasks.segmentation_summary,
        ("pixel_values",),
        accuracy_outputs=("logits",),
        derive=vision_tasks.derive_mask,
    ),
    Family(
        "depth_estimation",
        TASK_FAMILIES["depth_estimation"],
        vision_tasks.depth_summary,
        ("pixel_values",),
        accuracy_outputs=("predicted_depth",),
    ),
)
# --- end vision families ---

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("causal_lm", TASK_FAMILIES["causal_lm"], top_tokens),
        Family("masked_lm", TASK_FAMILIES["masked_lm"], top_tokens),
        Family("feature_extraction", TASK_FAMILIES["feature_extraction"], embedding_norm, pools=True),
        Family("sequence_classification", TASK_FAMILIES["sequence_classification"], predicted_label),
        Family("question_answering", TASK_FAMILIES["question_answering"], answer_span),
        Family("token_classification", TASK_FAMILIES["token_classification"], token_labels),
        Family("seq2seq", TASK_FAMILIES["seq2seq"], top_tokens, ("decoder_input_ids",)),
        Family("image_classification", TASK_FAMILIES["image_classification"], predicted_label, ("pixel_values",)),
        Family("speech_seq2seq", TASK_FAMILIES["speech_seq2seq"], top_tokens, ("decoder_input_ids",)),
        Family("vision_seq2seq", TASK_FAMILIES["vision_seq2seq"], top_tokens, ("pixel_values", "decoder_input_ids")),
        # audio, time series, LLM embedders and rerankers (issue 13)
        Family(
            "ctc_speech_recognition", TASK_FAMILIES["ctc_speech_recognition"], ctc_transcript, kept_outputs=("logits",)
        ),
        Family(
            "audio_classification", TASK_FAMILIES["audio_classification"], predicted_label, kept_outputs=("logits",)
        ),
        Family(
            "time_series_forecasting",
            TASK_FAMILIES["time_series_forecasting"],
            forecast,
            kept_outputs=("prediction_outputs", "mean_predictions", "full_predictions", "sequences"),
        ),
        Family(
            "llm_embedding",
            TASK_FAMILIES["llm_embedding"],
            llm_embedding,
            pools=True,
            default_pooling="lasttoken",
            kept_outputs=("sentence_embedding",),
        ),
        Family("reranker", TASK_FAMILIES["reranker"], rerank_scores, kept_outputs=("logits",)),
        *VISION_FAMILIES,
    )
}


def get_family(name: str) -> Family:
    try:
        return FAMILIES[name]
    except KeyError:
        raise UnsupportedModel(f"unknown task family '{name}' (known: {', '.join(FAMILIES)})") from None
