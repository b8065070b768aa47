"""Deterministic model inputs built from the config and the model's forward signature.

`model.dummy_inputs` is not enough (Whisper reports input_ids but needs input_features; LayoutLM
needs bbox), so each input a forward accepts is built by name from the config's sizes, seeded
through a torch.Generator so the reference and the device run see identical tensors.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from .errors import UnsupportedModel
from .spec import InputRecipe

TEXT_SUBCONFIGS = ("text_config", "encoder", "text_encoder", "language_config")
DECODER_SUBCONFIGS = ("decoder", "text_config")
VISION_SUBCONFIGS = ("vision_config", "encoder", "backbone_config")
# Inputs that travel with the main input whenever the forward accepts them.
COMPANIONS = {"input_ids": ("attention_mask", "token_type_ids", "bbox")}
TEXT_POSITION_LIMITS = ("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "seq_length")


def find_attr(config: Any, names: Iterable[str], subconfigs: Iterable[str] = ()) -> Any:
    """First non-None attribute among names on the config, then on the listed sub-configs."""
    for holder in [config, *(getattr(config, s, None) for s in subconfigs)]:
        if holder is None:
            continue
        for name in names:
            value = getattr(holder, name, None)
            if value is not None:
                return value
    return None


def routing_top_k(config: Any) -> int | None:
    """Experts per token of a mixture-of-experts config (None: not an MoE model)."""
    experts = find_attr(config, ("num_experts", "num_local_experts", "n_routed_experts"), TEXT_SUBCONFIGS)
    k = find_attr(config, ("num_experts_per_tok", "moe_topk", "top_k"), TEXT_SUBCONFIGS)
    return int(k) if isinstance(experts, int) and experts > 1 and isinstance(k, int) and k > 0 else None


@dataclass
class InputContext:
    config: Any
    recipe: InputRecipe
    generator: torch.Generator
    float_dtype: torch.dtype

    @property
    def batch(self) -> int:
        return self.recipe.batch_size

    def randint(self, low: int, high: int, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.randint(low, high, shape, generator=self.generator, dtype=torch.long)

    def randn(self, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.randn(shape, generator=self.generator, dtype=torch.float32).to(self.float_dtype)

    def text_len(self) -> int:
        """recipe.seq_len, kept inside the position table (minus 2 for RoBERTa's offset)."""
        limit = find_attr(self.config, TEXT_POSITION_LIMITS, TEXT_SUBCONFIGS)
        seq = self.recipe.seq_len
        if isinstance(limit, int) and limit > 4:
            seq = min(seq, limit - 2)
        return seq


def special_token_ids(config: Any) -> set[int]:
    """Every *_token_id / *_token_index of the config and its sub-configs (pad, bos, eos, image,
    video, ...): random text must not contain them, e.g. a stray image token makes a
    vision-language model expect image features that were never given."""
    found: set[int] = set()
    holders = [config, *(v for v in vars(config).values() if hasattr(v, "to_dict") and hasattr(v, "model_type"))]
    for holder in holders:
        for name, value in vars(holder).items():
            if not name.endswith(("_token_id", "_token_index", "_token_ids")):
                continue
            for item in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(item, int) and not isinstance(item, bool):
                    found.add(item)
    return found


def _token_ids(ctx: InputContext, vocab: Any, shape: tuple[int, int]) -> torch.Tensor:
    if not isinstance(vocab, int) or vocab < 2:
        raise UnsupportedModel("the config has no usable vocab_size to build token ids from")
    low = 5 if vocab > 50 else 0  # keep clear of the usual special tokens
    ids = ctx.randint(low, vocab, shape)
    specials = special_token_ids(ctx.config)
    safe = next((i for i in range(low, vocab) if i not in specials), None)
    if safe is not None:
        for token in specials:
            ids[ids == token] = safe
    return ids


def input_ids(ctx: InputContext) -> torch.Tensor:
    vocab = find_attr(ctx.config, ("vocab_size",), TEXT_SUBCONFIGS)
    return _token_ids(ctx, vocab, (ctx.batch, ctx.text_len()))


def attention_mask(ctx: InputContext) -> torch.Tensor:
    return torch.ones((ctx.batch, ctx.text_len()), dtype=torch.long)


def token_type_ids(ctx: InputContext) -> torch.Tensor | None:
    type_vocab = find_attr(ctx.config, ("type_vocab_size",), TEXT_SUBCONFIGS)
    if not isinstance(type_vocab, int) or type_vocab < 1:
        return None  # the model has no segment embeddings (DistilBERT, RoBERTa-style with 1 is fine)
    return torch.zeros((ctx.batch, ctx.text_len()), dtype=torch.long)


def bbox(ctx: InputContext) -> torch.Tensor:
    """Valid layout boxes (x0 <= x1, y0 <= y1) inside the 2-D position table (0..1000)."""
    limit = find_attr(ctx.config, ("max_2d_position_embeddings",), TEXT_SUBCONFIGS) or 1024
    top = min(1000, int(limit) - 1)
    shape = (ctx.batch, ctx.text_len())
    x0, y0 = ctx.randint(0, top // 2 + 1, shape), ctx.randint(0, top // 2 + 1, shape)
    x1 = x0 + ctx.randint(0, top // 2 + 1, shape)
    y1 = y0 + ctx.randint(0, top // 2 + 1, shape)
    return torch.stack([x0, y0, x1.clamp(max=top), y1.clamp(max=top)], dim=-1)


def decoder_input_ids(ctx: InputContext) -> torch.Tensor:
    config = ctx.config
    vocab = find_attr(config, ("vocab_size",), DECODER_SUBCONFIGS)
    decoder = getattr(config, "decoder", None)
    if decoder is not None and getattr(decoder, "vocab_size", None):
        vocab = decoder.vocab_size
    start = find_attr(config, ("decoder_start_token_id", "bos_token_id", "pad_token_id"), DECODER_SUBCONFIGS)
    length = ctx.recipe.decoder_seq_len
    limit = find_attr(config, ("max_target_positions",), DECODER_SUBCONFIGS)
    if isinstance(limit, int) and limit > 1:
        length = min(length, limit)
    ids = _token_ids(ctx, vocab, (ctx.batch, length))
    if isinstance(start, int) and 0 <= start < vocab:
        ids[:, 0] = start
    return ids


def _image_hw(ctx: InputContext) -> tuple[int, int]:
    size = ctx.recipe.image_size or find_attr(ctx.config, ("image_size",), VISION_SUBCONFIGS) or 224
    if isinstance(size, dict):  # {"height": h, "width": w} or {"shortest_edge": s}
        values = [v for v in size.values() if isinstance(v, int)]
        size = values[:2] if len(values) >= 2 else (values[0] if values else 224)
    if isinstance(size, (list, tuple)):
        return int(size[0]), int(size[-1])
    return int(size), int(size)


def pixel_values(ctx: InputContext) -> torch.Tensor:
    channels = find_attr(ctx.config, ("num_channels",), VISION_SUBCONFIGS) or 3
    height, width = _image_hw(ctx)
    return ctx.randn((ctx.batch, int(channels), height, width))


def input_features(ctx: InputContext) -> torch.Tensor:
    """Log-mel style features: Whisper is (batch, mels, 2 * max_source_positions) exactly;
    Speech2Text-style encoders take (batch, frames, features)."""
    config, recipe = ctx.config, ctx.recipe
    mels = recipe.num_mel_bins or find_attr(config, ("num_mel_bins",), ("encoder", "audio_config"))
    if mels:
        positions = find_attr(config, ("max_source_positions",), ("encoder", "audio_config"))
        frames = recipe.audio_frames or (2 * positions if positions else 3000)
        return ctx.randn((ctx.batch, int(mels), int(frames)))
    per_channel = find_attr(config, ("input_feat_per_channel",), ("encoder",))
    if per_channel:
        channels = find_attr(config, ("input_channels",), ("encoder",)) or 1
        return ctx.randn((ctx.batch, recipe.audio_frames or 64, int(per_channel) * int(channels)))
    raise UnsupportedModel(
        "forward takes input_features but the config has neither num_mel_bins nor input_feat_per_channel"
    )


# --- audio through the model's own feature extractor, time series (issue 13) ---
EXTRACTOR_SIZES = ("num_mel_bins", "max_length", "sampling_rate")  # extractor arguments the config sizes


def feature_extractor(config: Any) -> Any:
    """The feature extractor class transformers pairs with this model type, built with the config's
    sizes (AST: num_mel_bins, max_length); None when the type has none. No Hub access."""
    try:
        import transformers
        from transformers.models.auto.feature_extraction_auto import FEATURE_EXTRACTOR_MAPPING_NAMES
    except ImportError:
        return None
    cls = getattr(transformers, FEATURE_EXTRACTOR_MAPPING_NAMES.get(getattr(config, "model_type", ""), "") or "", None)
    if cls is None:
        return None
    accepted = inspect.signature(cls.__init__).parameters
    sizes = {
        k: getattr(config, k) for k in EXTRACTOR_SIZES if k in accepted and isinstance(getattr(config, k, None), int)
    }
    return cls(**sizes)


def waveform(ctx: InputContext, samples: int) -> torch.Tensor:
    """Seeded speech-like audio in [-1, 1]: three tones between 100 and 800 Hz per item plus noise."""
    t = torch.arange(samples, dtype=torch.float32) / 16000.0
    freqs = 100.0 + ctx.randint(0, 700, (ctx.batch, 3, 1)).float()
    tones = torch.sin(2 * torch.pi * freqs * t).sum(dim=1) / 3.0
    noise = torch.randn((ctx.batch, samples), generator=ctx.generator)
    return (0.8 * tones + 0.05 * noise).clamp(-1.0, 1.0)


def input_values(ctx: InputContext) -> torch.Tensor:
    """Raw audio (wav2vec2, HuBERT) or a spectrogram (AST): seeded audio through the feature
    extractor of the model type, so normalisation and layout are the model's own; a model type
    without one gets the seeded audio as is."""
    audio = waveform(ctx, ctx.recipe.audio_frames or 16000)
    extractor = feature_extractor(ctx.config)
    if extractor is None:
        return audio.to(ctx.float_dtype)
    rate = getattr(extractor, "sampling_rate", 16000)
    values = extractor(list(audio.numpy()), sampling_rate=rate, return_tensors="pt")["input_values"]
    return values.to(ctx.float_dtype)


def past_values(ctx: InputContext) -> torch.Tensor:
    """A seeded history of context_length steps (trend + season + noise): (batch, steps) for
    univariate forecasters (TimesFM), (batch, steps, channels) with num_input_channels (PatchTST)."""
    steps = find_attr(ctx.config, ("context_length",)) or ctx.recipe.seq_len
    channels = find_attr(ctx.config, ("num_input_channels",))
    shape = (ctx.batch, int(steps), int(channels)) if channels else (ctx.batch, int(steps))
    t = torch.arange(int(steps), dtype=torch.float32).reshape(1, -1, *([1] if channels else []))
    level = torch.rand(shape[:1] + (1,) * (len(shape) - 1), generator=ctx.generator) * 10
    season = torch.sin(2 * torch.pi * t / 7.0) * 2
    noise = torch.randn(shape, generator=ctx.generator) * 0.1
    return (level + 0.05 * t + season + noise).to(ctx.float_dtype)


BUILDERS: dict[str, Callable[[InputContext], torch.Tensor | None]] = {
    "input_ids": input_ids,
    "attention_mask": attention_mask,
    "token_type_ids": token_type_ids,
    "bbox": bbox,
    "decoder_input_ids": decoder_input_ids,
    "pixel_values": pixel_values,
    "input_features": input_features,
    "input_values": input_values,
    "past_values": past_values,
}


@dataclass(frozen=True)
class Signature:
    accepted: frozenset[str]
    required: tuple[str, ...]
    takes_kwargs: bool

    @classmethod
    def of(cls, model: torch.nn.Module) -> Signature:
        params = inspect.signature(model.forward).parameters.values()
        named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        return cls(
            accepted=frozenset(p.name for p in named),
            required=tuple(p.name for p in named if p.default is p.empty),
            takes_kwargs=any(p.kind == p.VAR_KEYWORD for p in params),
        )


def wanted_inputs(model: torch.nn.Module, config: Any, family_inputs: Iterable[str]) -> list[str]:
    """The model's main input, its companions, what the family adds, and what the config implies."""
    main = getattr(model, "main_input_name", None) or "input_ids"
    names = [main, *COMPANIONS.get(main, ()), *family_inputs]
    if getattr(config, "is_encoder_decoder", False):
        names.append("decoder_input_ids")
    dual_encoder = getattr(config, "vision_config", None) is not None and not any(
        hasattr(config, a) for a in ("image_token_id", "image_token_index")
    )
    if main == "input_ids" and dual_encoder:
        names.append("pixel_values")  # CLIP-style text+vision models need both; a VLM here runs text-only
        # (the image_text_to_text family feeds VLMs image + text through vision_inputs.py)
    return list(dict.fromkeys(names))


def build_model_inputs(
    model: torch.nn.Module, config: Any, recipe: InputRecipe, family_inputs: Iterable[str]
) -> dict[str, torch.Tensor]:
    """Inputs for one forward call, on CPU; raises UnsupportedModel naming what is missing."""
    signature = Signature.of(model)
    main = getattr(model, "main_input_name", None) or "input_ids"
    if main not in signature.accepted and not signature.takes_kwargs:
        raise UnsupportedModel(f"{type(model).__name__}.forward does not accept its main input '{main}'")
    float_dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    ctx = InputContext(config, recipe, torch.Generator().manual_seed(recipe.seed), float_dtype)
    inputs: dict[str, torch.Tensor] = {}
    for name in wanted_inputs(model, config, family_inputs):
        if name in signature.accepted and name in BUILDERS:
            value = BUILDERS[name](ctx)
            if value is not None:
                inputs[name] = value
    for name in signature.required:
        if name in inputs:
            continue
        if name not in BUILDERS:
            raise UnsupportedModel(
                f"{type(model).__name__}.forward requires '{name}', which no input builder knows how to make"
            )
        value = BUILDERS[name](ctx)
        if value is None:
            raise UnsupportedModel(f"{type(model).__name__}.forward requires '{name}' but the config cannot size it")
        inputs[name] = value
    return inputs


def forward_flags(model: torch.nn.Module) -> dict[str, Any]:
    """Keyword flags for a plain inference forward: named outputs, no KV cache to carry, and
    the router logits of a mixture-of-experts model."""
    accepted = Signature.of(model).accepted
    flags = {k: v for k, v in (("return_dict", True), ("use_cache", False)) if k in accepted}

    if "output_router_logits" in accepted and routing_top_k(getattr(model, "config", None)):
        flags["output_router_logits"] = True  # MoE: routes are compared as decisions (families.routing_outputs)
    return flags
