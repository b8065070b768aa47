"""Roofline position of one benchmark run: FLOPs and bytes per forward vs the measured peaks.

Estimates come from the figures accuracy_run.py recorded (parameter counts of the model actually
built, config sizes, input shapes), so they describe what was timed, depth reduction included:
- FLOPs = 2 x non-embedding parameters x tokens (every weight is one multiply-add per token;
  encoder-decoder models split the weights between the two token streams)
  + attention scores and mixing 4 x batch x seq^2 x hidden x layers
  + the vocabulary projection 2 x tokens x vocab x hidden for token-predicting families;
- bytes = every weight read once + activations written and read ~16 times per layer per token
  + the logits written.
Peaks are the environment probe's measured GEMM throughput (for the run's dtype) and copy
bandwidth on the same kind of device. Attainable = min(peak FLOP/s, intensity x bandwidth).
"""

from __future__ import annotations

from typing import Any

BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float64": 8}
VOCAB_FAMILIES = {"causal_lm", "masked_lm", "seq2seq", "speech_seq2seq", "vision_seq2seq"}
ACTIVATION_PASSES = 16


class RooflineError(ValueError):
    """Not enough recorded figures (or no matching probe) to place the run."""


def _first(cfg: dict[str, Any], *keys: str) -> float | None:
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value)
    return None


def _token_streams(inputs: dict[str, Any], cfg: dict[str, Any]) -> tuple[float, float, float, float]:
    """(encoder/main tokens, decoder tokens, batch, main sequence length) from input shapes."""
    main = dec = batch = seq = 0.0
    for name, info in inputs.items():
        shape = info.get("shape") or []
        if name == "decoder_input_ids" and len(shape) == 2:
            dec = float(shape[0] * shape[1])
        elif name == "input_ids" and len(shape) == 2:
            batch, seq, main = float(shape[0]), float(shape[1]), float(shape[0] * shape[1])
        elif name == "pixel_values" and len(shape) == 4 and not main:
            patch = _first(cfg, "patch_size") or 16.0
            seq = (shape[2] // patch) * (shape[3] // patch) + 1
            batch, main = float(shape[0]), float(shape[0]) * seq
        elif name == "input_features" and len(shape) == 3 and not main:
            batch, seq = float(shape[0]), float(shape[2]) / 2.0  # conv front-end halves the frames
            main = batch * seq
    return main, dec, batch, seq


def estimate(metrics: dict[str, Any]) -> dict[str, float]:
    """FLOPs and bytes of one forward of the timed model."""
    model = metrics.get("model") or {}
    cfg = model.get("config") or {}
    params, embedding = model.get("parameters"), model.get("embedding_parameters") or 0
    if not isinstance(params, int) or params <= 0:
        raise RooflineError("the metrics file records no parameter count")
    main, dec, batch, seq = _token_streams(metrics.get("inputs") or {}, cfg)
    if main <= 0:
        raise RooflineError("no token-like input (input_ids, pixel_values, input_features) to size the work")
    hidden = _first(cfg, "hidden_size", "d_model", "n_embd")
    layers = float(model.get("layers_built") or _first(cfg, "num_hidden_layers", "num_layers", "n_layer") or 0)
    vocab = _first(cfg, "vocab_size")
    dense = params - embedding
    encoder_decoder = bool(cfg.get("is_encoder_decoder")) and dec > 0
    linear = 2.0 * dense * ((main + dec) / 2.0 if encoder_decoder else main)
    attention = 4.0 * batch * seq * seq * hidden * layers if hidden else 0.0
    head = (
        2.0 * (dec or main) * vocab * hidden
        if (metrics.get("task_family") in VOCAB_FAMILIES and vocab and hidden)
        else 0.0
    )
    width = BYTES.get((metrics.get("run") or {}).get("dtype", "float32"), 4)
    weights = params * width
    activations = ACTIVATION_PASSES * (main + dec) * (hidden or 0.0) * layers * width
    logits = (dec or main) * (vocab or 0.0) * width if head else 0.0
    return {
        "flops": linear + attention + head,
        "bytes": weights + activations + logits,
        "linear_flops": linear,
        "attention_flops": attention,
        "head_flops": head,
        "weight_bytes": float(weights),
        "activation_bytes": activations + logits,
    }


def roofline(metrics: dict[str, Any], probe: dict[str, Any] | None) -> dict[str, Any]:
    """Achieved vs attainable throughput for one run; needs a probe of the same device kind."""
    run = metrics.get("run") or {}
    if probe is None:
        raise RooflineError(
            f"no environment probe for device '{run.get('device')}' on the board (run scripts/env_probe.py first)"
        )
    if probe.get("measured_on") != run.get("device"):
        raise RooflineError(f"the probe was measured on {probe.get('measured_on')}, the run on {run.get('device')}")
    dtype = run.get("dtype", "float32")
    peak_gflops = (probe.get("peaks") or {}).get("gemm_gflops", {}).get(dtype)
    bandwidth = (probe.get("peaks") or {}).get("bandwidth_gbs")
    if not peak_gflops or not bandwidth:
        raise RooflineError(f"the probe has no measured peak for {dtype}")
    est = estimate(metrics)
    median_s = float(metrics["timing"]["median_ms"]) / 1000.0
    intensity = est["flops"] / est["bytes"]
    ridge = peak_gflops / bandwidth
    attainable = min(peak_gflops, intensity * bandwidth)
    achieved = est["flops"] / median_s / 1e9
    return {
        "adaptation": metrics.get("adaptation"),
        "device": run.get("device"),
        "dtype": dtype,
        "gflops_per_forward": est["flops"] / 1e9,
        "mbytes_per_forward": est["bytes"] / 1e6,
        "arithmetic_intensity": intensity,
        "ridge_point": ridge,
        "bound": "compute" if intensity >= ridge else "memory",
        "peak_gflops": peak_gflops,
        "bandwidth_gbs": bandwidth,
        "attainable_gflops": attainable,
        "achieved_gflops": achieved,
        "pct_of_attainable": 100.0 * achieved / attainable,
        "median_ms": median_s * 1000.0,
        "estimate": est,
        "depth_reduced": bool((metrics.get("model") or {}).get("depth_reduced")),
    }


def format_roofline(r: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"{r['adaptation']} on {r['device']} {r['dtype']} (median {r['median_ms']:.3f} ms"
            + (", depth reduced" if r["depth_reduced"] else "")
            + ")",
            f"  work per forward: {r['gflops_per_forward']:.4f} GFLOP, {r['mbytes_per_forward']:.2f} MB moved "
            f"(intensity {r['arithmetic_intensity']:.2f} FLOP/byte; ridge {r['ridge_point']:.2f})",
            f"  measured peaks: {r['peak_gflops']:.1f} GFLOP/s, {r['bandwidth_gbs']:.1f} GB/s -> "
            f"attainable {r['attainable_gflops']:.2f} GFLOP/s ({r['bound']}-bound)",
            f"  achieved {r['achieved_gflops']:.3f} GFLOP/s = {r['pct_of_attainable']:.1f}% of attainable",
        ]
    )
