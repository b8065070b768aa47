"""Decode passes: what speeds up `generate` (the per-token decode loop), per device, and where not.

A forward-pass benchmark never runs the decode loop, so these passes live apart from the forward
catalogue (ab_runtime.optimize.passes) and act on generation: each has a name, a device, an exclusive
group, `applicable(device, model, config)` (None when it applies, else why not: device, release,
model shape, outside the documented limits) and `apply(model, generate_kwargs)`, which returns the
model and the keyword arguments for `model.generate(**inputs, **generate_kwargs)`.

Documented APIs they follow:
- transformers "Optimizing inference" (https://huggingface.co/docs/transformers/llm_optims, "Static kv-cache and
  torch.compile", option 1): `cache_implementation="static"` and
  `model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)`. The
  cache is passed to `generate` as its documented keyword (same effect as setting
  `model.generation_config.cache_implementation`); where the installed GenerationConfig has
  `disable_compile`, generate's own automatic compilation (transformers >= 4.48 compiles a static-
  cache decode step itself on CUDA) is switched off, so the compile a pass names is the only one.
- `mode="reduce-overhead"` is inductor's CUDA graphs (captured and replayed through cudagraph
  trees): CUDA only, so it is its own CUDA pass; the CPU and plain CUDA passes use the default mode.
- torchair (Ascend Extension for PyTorch 6.0.0 / 7.0.0 torchair guide): `torchair.CompilerConfig()`,
  `torchair.get_npu_backend(compiler_config=config)`, `torch.compile(..., backend=npu_backend)`;
  `config.mode = "reduce-overhead"` is aclgraph, documented from the 7.0.0 guide on as an
  experimental feature for Atlas A2 / A3 only, with `dynamic=True` not supported.
- `torch_npu.npu_fused_infer_attention_score`: see ab_runtime.optimize.npu_swaps (signature by release,
  limits, per-call fallback).
NPU passes import torch_npu / torchair only when applied or asked about; on a machine without them
they say why they do not apply. Accuracy: `token_agreement` compares greedy tokens with the eager
reference and accuracy_standard.generation_verdict judges them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..device import DeviceChoice, torchair_module
from ..ops import acceptance
from ..workload_figures import divergence
from . import npu_swaps

LOW_PRECISION = ("float16", "bfloat16")
# Product names the torchair guide lists for aclgraph, as the chips report themselves
# (torch.npu.get_device_name): Atlas A2 = Ascend 910B, Atlas A3 = Ascend 910_93.
ACLGRAPH_CHIPS = ("910B", "910_93")
TORCHAIR_DOC = "torchair guide, Ascend Extension for PyTorch 6.0.0 / 7.0.0 (get_npu_backend, CompilerConfig)"
ACLGRAPH_DOC = "torchair guide, Ascend Extension for PyTorch 7.0.0+ (CompilerConfig.mode = 'reduce-overhead')"
TRANSFORMERS_DOC = "transformers llm_optims 'Static kv-cache and torch.compile' (cache_implementation='static')"


@dataclass(frozen=True)
class DecodeConfig:
    """The generation workload a pass is asked about."""

    batch: int
    prompt_tokens: int
    new_tokens: int
    dtype: str  # the dtype the model generates in


@dataclass(frozen=True)
class DecodePass:
    name: str
    device: str  # cpu | cuda | npu
    group: str  # two passes of one group never combine
    summary: str
    documented: str  # the API and release followed
    applicable: Callable[[DeviceChoice, torch.nn.Module, DecodeConfig], str | None]
    apply: Callable[[torch.nn.Module, dict[str, Any]], tuple[torch.nn.Module, dict[str, Any]]]
    changes_code: bool = False

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "device": self.device,
            "kind": "decode",
            "group": self.group,
            "summary": self.summary,
            "changes_code": self.changes_code,
            "needs_restart": False,
            "workload": "generation",
            "documented": self.documented,
        }


# ---------------------------------------------------------------- greedy-token comparison


def token_agreement(reference: torch.Tensor, candidate: torch.Tensor) -> dict[str, Any]:
    """Generated tokens (batch x new tokens) of a candidate against the reference.

    match_rate: the fraction of reference positions the candidate reproduces (a shorter candidate's
    missing positions count as different); first_divergence: the first new-token index where any
    row differs (None when all agree); per_row_first_divergence likewise per row; compared: positions
    compared: the names the generation workload reports (match rate, first divergence).
    """
    if reference.dim() != 2 or candidate.dim() != 2 or reference.shape[0] != candidate.shape[0]:
        raise ValueError(
            f"token_agreement needs two (batch, tokens) tensors of one batch, got "
            f"{tuple(reference.shape)} and {tuple(candidate.shape)}"
        )
    rows = [divergence(c.tolist(), r.tolist()) for r, c in zip(reference.cpu(), candidate.cpu())]
    compared = sum(r["compared"] for r in rows)
    diverged = [r["first_divergence"] for r in rows if r["first_divergence"] is not None]
    return {
        "match_rate": sum(r["match_rate"] * r["compared"] for r in rows) / compared if compared else 1.0,
        "first_divergence": min(diverged) if diverged else None,
        "per_row_first_divergence": [r["first_divergence"] for r in rows],
        "compared": compared,
    }


# ---------------------------------------------------------------- applicability helpers


def _config_of(model: torch.nn.Module) -> Any:
    return getattr(model, "config", None)


def _generates(model: torch.nn.Module) -> str | None:
    can = getattr(model, "can_generate", None)
    return None if callable(can) and can() else "model does not generate (no GenerationMixin head)"


def _static_cache_ready(model: torch.nn.Module, config: DecodeConfig) -> str | None:
    """transformers' own flag for static cache + full-graph compile, and a cache that fits."""
    if _generates(model):
        return _generates(model)
    flag = getattr(model, "_can_compile_fullgraph", None)
    if flag is None:  # transformers before the flag was named so
        flag = getattr(model, "_supports_static_cache", False)
    if not flag:
        return f"{type(model).__name__} does not support a static cache with full-graph compile in this transformers"
    limit = getattr(_config_of(model), "max_position_embeddings", None)
    needed = config.prompt_tokens + config.new_tokens
    if isinstance(limit, int) and needed > limit:
        return f"prompt + new tokens = {needed} exceed max_position_embeddings {limit}"
    return None


def _on(kind: str) -> Callable[[DeviceChoice], str | None]:
    return lambda device: None if device.kind == kind else f"{kind} pass; this run is on {device.kind}"


def _import_reason(load: Callable[[], Any], what: str) -> str | None:
    try:
        load()
    except Exception as exc:  # absent, or CANN libraries missing: import itself fails
        return f"{what} cannot be imported ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    return None


def _static_compile_applies(kind: str) -> Callable[[DeviceChoice, torch.nn.Module, DecodeConfig], str | None]:
    return lambda device, model, config: _on(kind)(device) or _static_cache_ready(model, config)


def _torchair_applies(device: DeviceChoice, model: torch.nn.Module, config: DecodeConfig) -> str | None:
    return _on("npu")(device) or _import_reason(torchair_module, "torchair") or _static_cache_ready(model, config)


def _aclgraph_applies(device: DeviceChoice, model: torch.nn.Module, config: DecodeConfig) -> str | None:
    why = _torchair_applies(device, model, config)
    if why:
        return why
    if not hasattr(torchair_module().CompilerConfig(), "mode"):
        return "the installed torchair's CompilerConfig has no `mode` (aclgraph is documented from 7.0.0 on)"
    if not any(chip in device.name for chip in ACLGRAPH_CHIPS):
        return f"aclgraph is documented for Atlas A2 / A3 (Ascend 910B / 910_93) only, this is {device.name}"
    return None


def _fused_attention_applies(device: DeviceChoice, model: torch.nn.Module, config: DecodeConfig) -> str | None:
    why = _on("npu")(device) or _generates(model)
    if why:
        return why
    cfg = _config_of(model)
    if cfg is None or not hasattr(cfg, "_attn_implementation"):
        return "model has no switchable attention implementation"
    if config.dtype not in LOW_PRECISION:
        return f"npu_fused_infer_attention_score takes fp16/bf16 queries; generation runs in {config.dtype}"
    heads = getattr(cfg, "num_attention_heads", None)
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    hidden = getattr(cfg, "hidden_size", None)
    head_dim = getattr(cfg, "head_dim", None) or (hidden // heads if isinstance(hidden, int) and heads else None)
    lim = npu_swaps.FUSED_INFER_LIMITS
    if not isinstance(heads, int) or not isinstance(head_dim, int) or not isinstance(kv_heads, int):
        return "model config names no attention heads / head dim"
    if head_dim > lim["max_head_dim"] or heads > lim["max_heads"]:
        return f"head dim {head_dim} / heads {heads} outside the documented D <= 512, N <= 256"
    if heads % kv_heads or heads // kv_heads > lim["max_group"]:
        return f"{heads} query heads over {kv_heads} key/value heads: not a documented grouping (multiple, ratio <= 64)"
    if config.batch > lim["max_batch"] or config.prompt_tokens + config.new_tokens > lim["max_kv_len"]:
        return "batch or sequence outside the documented B <= 65536, KV_S <= 262144"
    why = _import_reason(npu_swaps._npu, "torch_npu")
    if why:
        return why
    if npu_swaps.fused_infer_scale_keyword() is None:
        return (
            "the installed torch_npu's npu_fused_infer_attention_score takes neither `scale` (7.0.0) nor "
            "`scale_value` (6.0.0), or is absent"
        )
    return None


# ---------------------------------------------------------------- apply


def _without_auto_compile(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Static cache on, transformers' automatic decode-step compile off where the version has it."""
    from transformers import GenerationConfig

    out = {**kwargs, "cache_implementation": "static"}
    if hasattr(GenerationConfig(), "disable_compile"):
        out["disable_compile"] = True
    return out


def _static_compile(
    **compile_kwargs: Any,
) -> Callable[[torch.nn.Module, dict[str, Any]], tuple[torch.nn.Module, dict[str, Any]]]:
    def apply(model: torch.nn.Module, kwargs: dict[str, Any]) -> tuple[torch.nn.Module, dict[str, Any]]:
        model.forward = torch.compile(model.forward, fullgraph=True, **compile_kwargs)
        return model, _without_auto_compile(kwargs)

    return apply


def _torchair(mode: str | None) -> Callable[[torch.nn.Module, dict[str, Any]], tuple[torch.nn.Module, dict[str, Any]]]:
    def apply(model: torch.nn.Module, kwargs: dict[str, Any]) -> tuple[torch.nn.Module, dict[str, Any]]:
        torchair = torchair_module()
        config = torchair.CompilerConfig()
        if mode is not None:
            config.mode = mode
        backend = torchair.get_npu_backend(compiler_config=config)
        # dynamic=False: static shapes per graph (aclgraph refuses dynamic=True).
        model.forward = torch.compile(model.forward, backend=backend, dynamic=False, fullgraph=True)
        return model, _without_auto_compile(kwargs)

    return apply


def _fused_attention(model: torch.nn.Module, kwargs: dict[str, Any]) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The decode attention swap, judged by the operator acceptance contract before any call runs
    it (acceptance.attention_swap: refused, the model's attention is put back and it raises)."""
    if acceptance.attention_swap("npu_fused_infer_attention", model, npu_swaps.swap_decode_attention) is None:
        raise RuntimeError("npu_fused_infer_attention: the installed operator takes neither `scale` nor `scale_value`")
    return model, dict(kwargs)


CATALOGUE: tuple[DecodePass, ...] = (
    DecodePass(
        "cpu_static_cache_compile",
        "cpu",
        "decode_graph",
        "static KV cache + torch.compile(model.forward, fullgraph=True) (inductor)",
        TRANSFORMERS_DOC,
        _static_compile_applies("cpu"),
        _static_compile(),
    ),
    DecodePass(
        "cuda_static_cache_compile",
        "cuda",
        "decode_graph",
        "static KV cache + torch.compile(model.forward, fullgraph=True) (inductor, no CUDA graphs)",
        TRANSFORMERS_DOC,
        _static_compile_applies("cuda"),
        _static_compile(),
    ),
    DecodePass(
        "cuda_static_cache_cudagraphs",
        "cuda",
        "decode_graph",
        "static KV cache + torch.compile(model.forward, mode='reduce-overhead', fullgraph=True): "
        "the documented recipe; reduce-overhead = CUDA graphs",
        TRANSFORMERS_DOC,
        _static_compile_applies("cuda"),
        _static_compile(mode="reduce-overhead"),
    ),
    DecodePass(
        "npu_static_cache_torchair",
        "npu",
        "decode_graph",
        "static KV cache + torch.compile(model.forward, backend=torchair.get_npu_backend()) "
        "(max-autotune: Ascend IR graph)",
        TORCHAIR_DOC,
        _torchair_applies,
        _torchair(None),
    ),
    DecodePass(
        "npu_static_cache_aclgraph",
        "npu",
        "decode_graph",
        "static KV cache + torchair CompilerConfig.mode='reduce-overhead' (aclgraph capture/replay)",
        ACLGRAPH_DOC,
        _aclgraph_applies,
        _torchair("reduce-overhead"),
    ),
    DecodePass(
        "npu_fused_infer_attention",
        "npu",
        "decode_attention",
        "decode-step attention -> torch_npu.npu_fused_infer_attention_score (BNSD; prefill unchanged)",
        "torch_npu npu_fused_infer_attention_score, Ascend Extension for PyTorch 7.0.0 (`scale`) / "
        "6.0.0 (`scale_value`)",
        _fused_attention_applies,
        _fused_attention,
        changes_code=True,
    ),
)
BY_NAME = {p.name: p for p in CATALOGUE}


def get(names: list[str]) -> list[DecodePass]:
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise ValueError(f"unknown decode pass(es): {', '.join(unknown)} (known: {', '.join(BY_NAME)})")
    return [BY_NAME[n] for n in names]


def applicability(device: DeviceChoice, model: torch.nn.Module, config: DecodeConfig) -> list[dict[str, Any]]:
    """Every decode pass with whether it applies here and, if not, why (for notes and reports)."""
    rows = []
    for p in CATALOGUE:
        why = p.applicable(device, model, config)
        rows.append(
            {
                "name": p.name,
                "device": p.device,
                "group": p.group,
                "applicable": why is None,
                "reason": why,
                "documented": p.documented,
            }
        )
    return rows


def apply_all(
    chosen: list[DecodePass], model: torch.nn.Module, generate_kwargs: dict[str, Any]
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Apply passes of distinct groups in order (attention swaps before the graph capture)."""
    groups = [p.group for p in chosen]
    clash = sorted({g for g in groups if groups.count(g) > 1})
    if clash:
        raise ValueError(f"decode passes of one group cannot combine: {', '.join(clash)}")
    for p in sorted(chosen, key=lambda p: p.group != "decode_attention"):
        model, generate_kwargs = p.apply(model, generate_kwargs)
    return model, generate_kwargs


def catalogue_table() -> list[dict[str, Any]]:
    return [p.describe() for p in CATALOGUE]
