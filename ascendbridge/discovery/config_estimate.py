"""Estimate a transformer's parameter count and depth from config.json alone.

Used when there are no safetensors weights to read (config-only demo models, .bin checkpoints,
a 70B config checked for size before anything is downloaded). The formula covers decoder-only,
encoder-only, encoder-decoder and ViT-style models built from standard attention + MLP blocks;
callers must label the result parameter_count_source='config_estimate'.
"""

from __future__ import annotations

from typing import Any

GATED_ACTIVATIONS = ("silu", "swish", "swiglu", "geglu", "gelu_pytorch_tanh_gated")
NESTED_TEXT_KEYS = ("text_config", "language_config", "llm_config")


def first_int(cfg: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def num_layers(cfg: dict[str, Any]) -> int | None:
    """Depth of the main stack (the encoder for encoder-decoders), as the dry run reduces it."""
    found = first_int(cfg, "num_hidden_layers", "n_layer", "num_layers", "n_layers", "encoder_layers")
    if found is not None:
        return found
    for key in (*NESTED_TEXT_KEYS, "decoder", "encoder"):
        sub = cfg.get(key)
        if isinstance(sub, dict):
            found = num_layers(sub)
            if found is not None:
                return found
    return None


def _block(h: int, heads: int, kv_heads: int, head_dim: int, inter: int, gated: bool, experts: int) -> int:
    attn = h * heads * head_dim + 2 * h * kv_heads * head_dim + heads * head_dim * h
    mlp = (3 if gated else 2) * h * inter * max(1, experts)
    return attn + mlp + 4 * h  # norms and biases, roughly


def estimate_parameters(cfg: dict[str, Any]) -> int | None:
    """A best-effort count, or None when the config lacks the sizes to estimate from."""
    enc, dec = cfg.get("encoder"), cfg.get("decoder")
    if isinstance(enc, dict) and isinstance(dec, dict):  # VisionEncoderDecoder / EncoderDecoder
        parts = [estimate_parameters(enc), estimate_parameters(dec)]
        return None if None in parts else sum(p for p in parts if p is not None)
    h = first_int(cfg, "hidden_size", "n_embd", "d_model", "dim", "embed_dim")
    if h is None:
        for key in NESTED_TEXT_KEYS:
            if isinstance(cfg.get(key), dict):
                return estimate_parameters(cfg[key])
        return None
    heads = first_int(cfg, "num_attention_heads", "n_head", "encoder_attention_heads", "num_heads", "n_heads") or 1
    kv_heads = first_int(cfg, "num_key_value_heads", "num_kv_heads") or heads
    head_dim = first_int(cfg, "head_dim", "d_kv") or max(1, h // heads)
    inter = first_int(cfg, "intermediate_size", "n_inner", "ffn_dim", "d_ff", "encoder_ffn_dim") or 4 * h
    act = str(cfg.get("hidden_act") or cfg.get("hidden_activation") or cfg.get("activation_function") or "")
    gated = act in GATED_ACTIVATIONS or str(cfg.get("feed_forward_proj", "")).startswith("gated")
    experts = first_int(cfg, "num_local_experts", "num_experts") or 1
    block = _block(h, heads, kv_heads, head_dim, inter, gated, experts)

    if cfg.get("is_encoder_decoder"):
        enc_layers = first_int(cfg, "encoder_layers", "num_layers") or 0
        dec_layers = first_int(cfg, "decoder_layers", "num_decoder_layers") or enc_layers
        cross = 2 * h * heads * head_dim + 2 * h * kv_heads * head_dim
        body = enc_layers * block + dec_layers * (block + cross)
    else:
        body = (num_layers(cfg) or 0) * block

    vocab = first_int(cfg, "vocab_size") or 0
    embed = vocab * h
    rotary = any(k.startswith(("rope", "rotary")) for k in cfg)
    if cfg.get("position_embedding_type", "absolute") == "absolute" and not rotary:
        embed += (first_int(cfg, "max_position_embeddings", "n_positions") or 0) * h
        embed += ((first_int(cfg, "max_source_positions") or 0) + (first_int(cfg, "max_target_positions") or 0)) * h
    embed += (first_int(cfg, "type_vocab_size") or 0) * h
    patch = first_int(cfg, "patch_size")
    if patch:
        channels = first_int(cfg, "num_channels") or 3
        embed += channels * patch * patch * h + ((first_int(cfg, "image_size") or 224) // patch) ** 2 * h
    head = vocab * h if vocab and cfg.get("tie_word_embeddings") is False else 0
    return body + embed + head


def proxy_depth_problem(depth: int | None, cfg: dict[str, Any]) -> str | None:
    """Why a reduced-depth proxy of `depth` layers cannot be built from this config (one line), or
    None: no depth was asked, or it is between 1 and the model's layer count."""
    if depth is None:
        return None
    layers = num_layers(cfg)
    if layers is None:
        return f"depth {depth}: the config names no layer count, so no reduced-depth proxy can be built"
    if not 1 <= depth <= layers:
        return f"depth {depth} is not within the model's {layers} layers (a proxy builds 1 to {layers})"
    return None


DEPTH_KEYS = (
    "num_hidden_layers",
    "n_layer",
    "num_layers",
    "n_layers",
    "encoder_layers",
    "decoder_layers",
    "num_decoder_layers",
)


def _with_depth(cfg: dict[str, Any], depth: int) -> dict[str, Any]:
    """The config with every layer count (nested text / encoder / decoder configs too) at most `depth`."""
    cut: dict[str, Any] = {}
    for key, value in cfg.items():
        if key in DEPTH_KEYS and isinstance(value, int) and not isinstance(value, bool):
            cut[key] = min(value, depth)
        elif isinstance(value, dict):
            cut[key] = _with_depth(value, depth)
        else:
            cut[key] = value
    return cut


def proxy_parameters(parameters: int, cfg: dict[str, Any], depth: int) -> int:
    """The parameters of a reduced-depth proxy of `depth` layers per stack: the full count times the
    share the config estimate keeps (embeddings and heads stay, the cut layers go); the full count
    when the config gives no estimate."""
    full, cut = estimate_parameters(cfg), estimate_parameters(_with_depth(cfg, depth))
    if not full or cut is None:
        return parameters
    return max(1, round(parameters * cut / full))


def built_parameters(parameters: int | None, cfg: dict[str, Any], depth: int | None) -> int | None:
    """The parameters the stages build: the registered proxy's when the model has one, else the
    full count (None: discovery recorded none)."""
    return proxy_parameters(parameters, cfg, depth) if parameters and depth else parameters
