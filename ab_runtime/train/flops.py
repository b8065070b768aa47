"""Model FLOPs per trained token, and MFU: the share of the device's peak a training run uses.

Per token of a dense transformer (Kaplan et al. 2020; the attention term as in PaLM, Chowdhery et
al. 2022, appendix B): the forward costs 2 FLOPs per parameter the token passes through; the
backward 2 more for the activations' gradients and 2 per trained parameter for the weights'
gradients (a LoRA run trains few, so it costs about 4N, a full run 6N); the attention scores and
their weighting add 2 x 2 x layers x hidden x sequence forward, three times that with the backward.
Embedding lookups are not products: the input embedding's parameters are left out (tied output
heads are counted once, as products). Standard library only.
"""

from __future__ import annotations

from typing import Any


def training_flops_per_token(
    config: dict[str, Any], parameters: int, trainable: int, seq_len: int, embedding_parameters: int = 0
) -> float:
    """FLOPs one trained token costs: (2 + 2) x the multiplied parameters + 2 x the trained ones,
    plus the attention term; `config` is the model's config.json (layers and hidden size)."""
    layers = int(config.get("num_hidden_layers") or config.get("n_layer") or config.get("num_layers") or 0)
    hidden = int(config.get("hidden_size") or config.get("n_embd") or config.get("d_model") or 0)
    multiplied = max(0, parameters - embedding_parameters)
    attention = 3 * 4 * layers * hidden * seq_len  # forward 2 x 2 x L x h x s; backward twice that
    return 4.0 * multiplied + 2.0 * min(trainable, multiplied) + attention


def mfu(flops_per_token: float, tokens_per_s: float, peak_flops: float) -> float | None:
    """Model FLOPs utilisation: the model's FLOPs per second over the device's peak (None without one)."""
    if peak_flops <= 0 or tokens_per_s <= 0:
        return None
    return flops_per_token * tokens_per_s / peak_flops
