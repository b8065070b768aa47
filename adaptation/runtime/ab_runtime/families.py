"""Task-family registry: which inputs a family drives and how its result reads to a person.

Names mirror ascendbridge/task_families.py (a framework test keeps them equal); this copy
exists because adaptations run without the framework. Inputs are built by ab_runtime.inputs from
the config and forward signature, so a family only adds what the model's main input does not
imply (e.g. decoder_input_ids for encoder-decoders).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

import torch

from .errors import UnsupportedModel
from .inputs import build_model_inputs
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
}

Summary = Callable[[dict[str, torch.Tensor], Any], str]


def _first(outputs: dict[str, torch.Tensor], *names: str) -> Optional[torch.Tensor]:
    return next((outputs[n] for n in names if n in outputs), None)


def _fallback(outputs: dict[str, torch.Tensor]) -> str:
    name, value = next(iter(outputs.items()))
    return f"{name} shape {list(value.shape)}"


def top_tokens(outputs: dict[str, torch.Tensor], config: Any) -> str:
    logits = _first(outputs, "logits")
    if logits is None or logits.dim() < 2:
        return _fallback(outputs)
    ids = logits[0, -1].float().topk(min(5, logits.shape[-1])).indices.tolist()
    return f"top token ids at the last position: {ids}"


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


def pool(hidden: torch.Tensor, mask: Optional[torch.Tensor], mode: str) -> torch.Tensor:
    """sentence-transformers pooling over tokens: mean (mask-weighted), cls or max."""
    if mode == "cls":
        return hidden[:, 0]
    weights = (mask if mask is not None else torch.ones(hidden.shape[:2], device=hidden.device))
    weights = weights.unsqueeze(-1).to(hidden.dtype)
    if mode == "max":
        return hidden.masked_fill(weights == 0, float("-inf")).max(dim=1).values
    if mode == "mean":
        return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
    raise UnsupportedModel(f"unknown sentence-transformers pooling '{mode}' (expected mean, cls or max)")


@dataclass(frozen=True)
class Family:
    name: str
    auto_class: str
    summary: Summary
    extra_inputs: tuple[str, ...] = ()
    pools: bool = False  # adds a sentence_embedding when the spec names a pooling mode

    def build_inputs(self, model: torch.nn.Module, config: Any, recipe: InputRecipe, seed: int) -> dict[str, torch.Tensor]:
        """Seeded inputs for the model's forward (on CPU; the caller moves them)."""
        if seed != recipe.seed:
            recipe = replace(recipe, seed=seed)
        return build_model_inputs(model, config, recipe, self.extra_inputs)

    def named_outputs(
        self, outputs: Any, inputs: dict[str, torch.Tensor], pooling: Optional[str] = None, normalize: bool = False
    ) -> dict[str, torch.Tensor]:
        """The forward's tensors by name, plus the sentence-transformers head when the spec has one:
        Pooling (`pooling`) then Normalize (`normalize`), as modules.json chains them, so the
        sentence_embedding equals what sentence-transformers' encode() returns."""
        named = flatten_outputs(outputs)
        if self.pools and pooling and "last_hidden_state" in named:
            pooled = pool(named["last_hidden_state"], inputs.get("attention_mask"), pooling)
            named["sentence_embedding"] = torch.nn.functional.normalize(pooled, p=2, dim=-1) if normalize else pooled
        if not named:
            raise UnsupportedModel("the forward returned no tensors")
        return named


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
    )
}


def get_family(name: str) -> Family:
    try:
        return FAMILIES[name]
    except KeyError:
        raise UnsupportedModel(f"unknown task family '{name}' (known: {', '.join(FAMILIES)})") from None
