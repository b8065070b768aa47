"""Module swaps to torch_npu fused operators (Ascend only; construction is testable with a fake).

Signatures follow torch_npu's documentation:
- npu_rms_norm(self, gamma, epsilon=1e-06) -> (y, rstd); fp16/bf16/fp32, gamma same dtype as x,
  x of 1..8 dims (older releases: 2..8).
- npu_swiglu(input, dim=-1) -> swish(A) * B with A, B the two halves of `input` along dim;
  1..8 dims, dim size even, contiguous input; Atlas A2 only.
- npu_rotary_mul(x, r1, r2) -> r1 * x + r2 * rotate_half(x); 4-D x, cos/sin broadcast as B1SD
  against BNSD. Documented limits differ by release: Ascend Extension for PyTorch 6.0.0 says
  D == 128, B and N <= 1000 and, for BNSD, no B*N > 8*S; 7.0.0 (jit_compile=False) says D < 896
  and even, B and N < 1000. The installed release cannot be told reliably from
  torch_npu.__version__, so ROTARY_LIMITS holds the limits both documents allow (the stricter).
- npu_fusion_attention(query, key, value, head_num, input_layout, *, atten_mask=None, scale=1.,
  keep_prob=1., sparse_mode=0, ...) -> (attention_out, ...) (6.0.0 / 7.0.0): fp16/bf16; key and
  value may have fewer heads than the query (grouped-query attention: N_q % N_kv == 0), so they
  are passed as they are, never repeated; atten_mask is bool with True = masked out, shaped
  [B,1,S1,S2] / [B,N,S1,S2] / [S1,S2]; sparse_mode 2 (leftUpCausal) takes the documented
  compressed causal mask, triu(ones(2048, 2048), 1), instead of a full S1 x S2 one; head dim <= 512.
- npu_fused_infer_attention_score(query, key, value, *, atten_mask=None, ..., num_heads=1, scale=1.0,
  ..., input_layout="BSH", num_key_value_heads=0, ...) -> (attention_out, softmax_lse): the decode swap
  (fused_infer_attention) calls it only for one-token queries (Q_S == 1, the IncreFlashAttention
  branch) in BNSD layout. The scale keyword was renamed between releases: `scale_value` in
  Ascend Extension for PyTorch 6.0.0 / 6.0.RC3, `scale` in 7.0.0 (and op-plugin's current docs);
  the installed operator's own argument names decide (fused_infer_scale_keyword). Limits of the
  7.0.0 page for Q_S == 1, float inputs: fp16/bf16 (Atlas A2/A3), B <= 65536, N <= 256,
  KV_S <= 262144, D <= 512, num_heads a multiple of num_key_value_heads with ratio <= 64,
  atten_mask bool (True = masked) shaped (B, 1, 1, KV_S).
Every swap checks these limits per call and falls back to the original code outside them, so a
swap can never change what is computed for shapes the operator does not document; attention also
falls back when the call carries what the fused kernel does not compute (logit soft-capping,
attention sinks, dropout), to the attention implementation the model had before the swap.
Swaps that patch a module-level function are switched on per call through a context variable,
so the baseline and the optimized model can run interleaved in one process.
"""

from __future__ import annotations

import contextvars
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

ROTARY_ACTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar("ab_npu_rotary", default=False)
ATTENTION_NAME = "ab_npu_fusion_attention"
FUSED_INFER_NAME = "ab_npu_fused_infer_attention"
ORIGINAL_ATTENTION = "_ab_attn_implementation_before_npu_swap"
LOW_PRECISION = (torch.float16, torch.bfloat16)
ROTARY_LIMITS = {"head_dim": 128, "max_batch": 999, "max_heads": 999, "bnsd_max_bn_per_s": 8}
FUSION_MAX_HEAD_DIM = 512
CAUSAL_MASK_SIZE = 2048  # the documented compressed mask for sparse_mode 2 / 3
SPARSE_LEFT_UP_CAUSAL = 2
UNSUPPORTED_ATTENTION_KWARGS = ("softcap", "s_aux", "sliding_window", "position_bias")
_CAUSAL_MASKS: dict[Any, torch.Tensor] = {}
FUSED_INFER_LIMITS = {"max_batch": 65536, "max_heads": 256, "max_kv_len": 262144, "max_head_dim": 512, "max_group": 64}
# The scale keyword of npu_fused_infer_attention_score, by release documentation.
FUSED_INFER_SCALE_KEYWORDS = {
    "scale": "Ascend Extension for PyTorch 7.0.0 (`scale`)",
    "scale_value": "Ascend Extension for PyTorch 6.0.0 / 6.0.RC3 (`scale_value`)",
}


def _npu() -> Any:
    if CPU_REFERENCE_ACTIVE:  # the operator acceptance contract on a host without an NPU
        return CPU_REFERENCE_ACTIVE[-1]
    import torch_npu  # only present in the ascend profile (tests install a FakeTorchNpu)

    return torch_npu


# CPU reference paths of the fused operators, from their documented formulas: what the swaps are
# held to by the operator acceptance contract (ab_runtime/ops/acceptance.py) where no NPU is present.
def _reference_rms_norm(
    x: torch.Tensor, gamma: torch.Tensor, epsilon: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + epsilon)
    return (xf * rstd).to(x.dtype) * gamma, rstd


def _reference_swiglu(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    a, b = x.chunk(2, dim=dim)
    return torch.nn.functional.silu(a) * b


def _reference_rotary_mul(
    x: torch.Tensor, r1: torch.Tensor, r2: torch.Tensor, rotary_mode: str = "half"
) -> torch.Tensor:
    x1, x2 = x.chunk(2, -1)
    return r1 * x + r2 * torch.cat((-x2, x1), dim=-1)


def _reference_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float
) -> torch.Tensor:
    """softmax(q k^T * scale, True = masked out) v in float32 on BNSD inputs, key/value heads
    grouped (native GQA); a fully masked row attends nothing."""
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scores = (q.float() @ k.float().transpose(-1, -2)) * scale
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    return (torch.softmax(scores, -1).nan_to_num(0.0) @ v.float()).to(q.dtype)


def _reference_fusion_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    head_num: int,
    input_layout: str,
    *,
    atten_mask: torch.Tensor | None = None,
    scale: float = 1.0,
    keep_prob: float = 1.0,
    sparse_mode: int = 0,
    **_: Any,
) -> tuple[Any, None, None]:
    if input_layout != "BNSD" or keep_prob != 1.0 or sparse_mode not in (0, 2, 3):
        raise ValueError("the CPU reference of npu_fusion_attention covers BNSD, keep_prob 1, sparse_mode 0 / 2 / 3")
    if sparse_mode in (2, 3):  # the compressed mask stands for leftUpCausal (2) / rightDownCausal (3)
        s1, s2 = query.shape[2], key.shape[2]
        atten_mask = torch.ones(s1, s2, dtype=torch.bool, device=query.device).triu(
            1 if sparse_mode == 2 else 1 + s2 - s1
        )
    return _reference_attention(query, key, value, atten_mask, scale), None, None


def _reference_fused_infer_attention_score(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    *,
    atten_mask: torch.Tensor | None = None,
    num_heads: int = 1,
    scale: float | None = None,
    scale_value: float | None = None,
    input_layout: str = "BSH",
    num_key_value_heads: int = 0,
    **_: Any,
) -> tuple[Any, None]:
    """Both releases' scale keyword (`scale`: 7.0.0, `scale_value`: 6.0.0) are taken."""
    if input_layout != "BNSD":
        raise ValueError("the CPU reference of npu_fused_infer_attention_score covers BNSD only")
    factor = scale if scale is not None else scale_value if scale_value is not None else 1.0
    return _reference_attention(query, key, value, atten_mask, factor), None


CPU_REFERENCE = types.SimpleNamespace(
    npu_rms_norm=_reference_rms_norm,
    npu_swiglu=_reference_swiglu,
    npu_rotary_mul=_reference_rotary_mul,
    npu_fusion_attention=_reference_fusion_attention,
    npu_fused_infer_attention_score=_reference_fused_infer_attention_score,
)
# A plain module-level stack, not a ContextVar: the swaps run inside torch.compile'd graphs, and
# dynamo traces a global's value but cannot trace ContextVar.get().
CPU_REFERENCE_ACTIVE: list[Any] = []


@contextmanager
def cpu_reference_ops() -> Iterator[None]:
    """Route the swaps' torch_npu calls to CPU_REFERENCE inside this block (the contract's runs)."""
    CPU_REFERENCE_ACTIVE.append(CPU_REFERENCE)
    try:
        yield
    finally:
        CPU_REFERENCE_ACTIVE.pop()


def rms_norm_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """RMSNorm modules with the plain x * rsqrt(mean(x^2) + eps) * weight semantics."""
    found = []
    for module in model.modules():
        name = type(module).__name__
        weight = getattr(module, "weight", None)
        eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
        # Gemma-style norms scale by (1 + weight): not what npu_rms_norm computes.
        if (
            name.endswith("RMSNorm")
            and "Gemma" not in name
            and isinstance(weight, torch.nn.Parameter)
            and weight.dim() == 1
            and isinstance(eps, float)
        ):
            found.append(module)
    return found


def _reroute(
    modules: list[torch.nn.Module], fused: Callable[[torch.nn.Module, torch.Tensor], torch.Tensor | None]
) -> int:
    """Give each module a forward that answers with `fused` (the torch_npu path) where it takes the
    input, else with the module's own forward; returns how many were rerouted."""
    for module in modules:

        def forward(self: torch.nn.Module, x: torch.Tensor, _orig: Callable = module.forward) -> torch.Tensor:
            out = fused(self, x)
            return _orig(x) if out is None else out

        module.forward = types.MethodType(forward, module)
    return len(modules)


def swap_rms_norm(model: torch.nn.Module) -> int:
    """Route every plain RMSNorm through torch_npu.npu_rms_norm; returns how many were swapped."""

    def fused(module: torch.nn.Module, x: torch.Tensor) -> torch.Tensor | None:
        if not 1 <= x.dim() <= 8 or x.shape[-1] != module.weight.shape[0]:
            return None
        eps = float(getattr(module, "variance_epsilon", getattr(module, "eps", 1e-6)))
        return _npu().npu_rms_norm(x, module.weight.to(x.dtype), epsilon=eps)[0]

    return _reroute(rms_norm_modules(model), fused)


def swiglu_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """MLPs computing down(silu(gate(x)) * up(x)) with separate gate/up projections."""
    found = []
    for module in model.modules():
        parts = [getattr(module, n, None) for n in ("gate_proj", "up_proj", "down_proj")]
        act = getattr(module, "act_fn", None)
        silu = isinstance(act, torch.nn.SiLU) or type(act).__name__ == "SiLUActivation"  # transformers' ACT2FN["silu"]
        if all(isinstance(p, torch.nn.Linear) for p in parts) and silu:
            found.append(module)
    return found


def swap_swiglu(model: torch.nn.Module) -> int:
    """Route every SwiGLU MLP through torch_npu.npu_swiglu on its fused gate/up output."""

    def fused(module: torch.nn.Module, x: torch.Tensor) -> torch.Tensor | None:
        if not 1 <= x.dim() <= 8:
            return None
        gate_up = torch.cat((module.gate_proj(x), module.up_proj(x)), dim=-1).contiguous()
        return module.down_proj(_npu().npu_swiglu(gate_up, dim=-1))

    return _reroute(swiglu_modules(model), fused)


def rotary_module(model: torch.nn.Module) -> types.ModuleType | None:
    """The model's modeling module when it defines HF's apply_rotary_pos_emb(q, k, cos, sin, ...)."""
    module = sys.modules.get(type(model).__module__)
    fn = getattr(module, "apply_rotary_pos_emb", None)
    return module if callable(fn) else None


def rotary_fits(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor) -> bool:
    """BNSD q/k with cos/sin of the same head dim, inside ROTARY_LIMITS."""
    if q.dim() != 4 or k.dim() != 4 or not cos.shape[-1] == q.shape[-1] == k.shape[-1]:
        return False
    lim = ROTARY_LIMITS
    return all(
        t.shape[-1] == lim["head_dim"]
        and t.shape[0] <= lim["max_batch"]
        and t.shape[1] <= lim["max_heads"]
        and t.shape[0] * t.shape[1] <= lim["bnsd_max_bn_per_s"] * t.shape[2]
        for t in (q, k)
    )


def install_rotary(model: torch.nn.Module) -> bool:
    """Patch the modeling module's apply_rotary_pos_emb once; active only inside rotary_active()."""
    module = rotary_module(model)
    if module is None:
        return False
    original = module.apply_rotary_pos_emb
    if getattr(original, "_ab_npu_rotary", False):
        return True

    def apply_rotary_pos_emb(
        q: torch.Tensor,
        k: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        *args: Any,
        unsqueeze_dim: int = 1,
        **kwargs: Any,
    ) -> Any:
        if not ROTARY_ACTIVE.get() or unsqueeze_dim != 1 or args or kwargs or not rotary_fits(q, k, cos):
            return original(q, k, cos, sin, *args, unsqueeze_dim=unsqueeze_dim, **kwargs)
        c, s = cos.unsqueeze(1).to(q.dtype), sin.unsqueeze(1).to(q.dtype)  # B1SD against BNSD
        npu = _npu()
        return npu.npu_rotary_mul(q, c, s), npu.npu_rotary_mul(k, c, s)

    apply_rotary_pos_emb._ab_npu_rotary = True  # type: ignore[attr-defined]  # a mark on the function object
    apply_rotary_pos_emb._ab_original = original  # type: ignore[attr-defined]  # what the contract compares with
    module.apply_rotary_pos_emb = apply_rotary_pos_emb  # type: ignore[attr-defined]  # a transformers modeling module, typed as a bare ModuleType
    return True


@contextmanager
def rotary_active() -> Iterator[None]:
    token = ROTARY_ACTIVE.set(True)
    try:
        yield
    finally:
        ROTARY_ACTIVE.reset(token)


def _causal_mask(device: torch.device) -> torch.Tensor:
    """The documented compressed causal mask for sparse_mode 2 / 3 (True = masked), one per device."""
    if device not in _CAUSAL_MASKS:
        ones = torch.ones(CAUSAL_MASK_SIZE, CAUSAL_MASK_SIZE, dtype=torch.bool, device=device)
        _CAUSAL_MASKS[device] = ones.triu(1)
    return _CAUSAL_MASKS[device]


def original_attention(module: torch.nn.Module) -> Callable[..., Any]:
    """The attention function the model used before the swap (eager: its modeling module's own)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    name = getattr(getattr(module, "config", None), ORIGINAL_ATTENTION, "sdpa")
    if name == "eager":
        eager = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
        return eager if callable(eager) else sdpa_attention_forward
    return ALL_ATTENTION_FUNCTIONS.get(name, sdpa_attention_forward)


def plain_attention_call(module: torch.nn.Module, dropout: float, kwargs: dict[str, Any]) -> bool:
    """True when the call asks for nothing neither NPU attention kernel has: no keyword it cannot
    honour, no attention sinks, no dropout."""
    carries = [k for k in UNSUPPORTED_ATTENTION_KWARGS if kwargs.get(k) is not None]
    return not carries and getattr(module, "sinks", None) is None and not dropout


def fused_attention_supported(query: torch.Tensor, key: torch.Tensor, mask: torch.Tensor | None, plain: bool) -> bool:
    """True when npu_fusion_attention computes exactly what this call (`plain`: plain_attention_call) asks for."""
    return (
        plain
        and query.dtype in LOW_PRECISION
        and query.shape[1] % key.shape[1] == 0
        and query.shape[-1] <= FUSION_MAX_HEAD_DIM
        and (mask is None or mask.dim() == 4)
    )


# The NPU operator behind an attention-interface function: (query, key, value, mask as the operators
# take it (True = masked out) or None, scale, causal without a mask) -> the output in BNSD.
AttentionKernel = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, float, bool], torch.Tensor]
AttentionFunction = Callable[..., tuple[torch.Tensor, torch.Tensor | None]]


def npu_attention(
    supported: Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None, bool], bool], kernel: AttentionKernel
) -> AttentionFunction:
    """A transformers attention-interface function (BNSD inputs) that runs `kernel` on the calls
    `supported` accepts (its last argument: plain_attention_call) and the model's original attention
    on every other call: one fallback, mask conversion and default scale for every NPU attention swap.

    Causal default as transformers' sdpa path: causal when no mask is given, the query is longer
    than one token and the module does not say is_causal=False."""

    def attention(
        module: torch.nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        scaling: float | None = None,
        dropout: float = 0.0,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if not supported(query, key, attention_mask, plain_attention_call(module, dropout, kwargs)):
            return original_attention(module)(
                module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs
            )
        is_causal = kwargs.get("is_causal")
        is_causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
        mask = None
        if attention_mask is not None:  # transformers: bool True = attend, or additive float; the ops: True = masked
            mask = ~attention_mask if attention_mask.dtype == torch.bool else attention_mask < -1.0
            mask = mask[..., : key.shape[2]]
        causal = mask is None and bool(is_causal) and query.shape[2] > 1
        scale = float(scaling) if scaling is not None else query.shape[-1] ** -0.5
        out = kernel(query, key, value, mask, scale, causal)
        return out.transpose(1, 2).contiguous(), None

    return attention


def _fusion_kernel(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None, scale: float, causal: bool
) -> torch.Tensor:
    """npu_fusion_attention; a causal call takes the compressed causal mask of sparse_mode 2
    (leftUpCausal), as torch's is_causal is top-left aligned."""
    sparse_mode = 0
    if causal:
        mask, sparse_mode = _causal_mask(query.device), SPARSE_LEFT_UP_CAUSAL
    return _npu().npu_fusion_attention(
        query.contiguous(),
        key.contiguous(),
        value.contiguous(),
        query.shape[1],
        "BNSD",
        atten_mask=mask,
        scale=scale,
        keep_prob=1.0,
        sparse_mode=sparse_mode,
    )[0]


# The transformers attention-interface function backed by npu_fusion_attention.
fusion_attention = npu_attention(fused_attention_supported, _fusion_kernel)


def op_argument_names(op: Any) -> tuple[str, ...]:
    """The argument names of a torch_npu operator: its registered schema (torch.ops overloads), else
    its Python signature; () when neither can be read."""
    import inspect

    for holder in (getattr(op, "default", None), op):
        schema = getattr(holder, "_schema", None)
        if schema is not None:
            return tuple(a.name for a in schema.arguments)
    try:
        return tuple(inspect.signature(op).parameters)
    except (TypeError, ValueError):
        return ()


def fused_infer_scale_keyword() -> str | None:
    """`scale` (7.0.0 signature) or `scale_value` (6.0.0), as the installed operator names it; None
    when torch_npu has no npu_fused_infer_attention_score or names neither."""
    op = getattr(_npu(), "npu_fused_infer_attention_score", None)
    names = op_argument_names(op) if op is not None else ()
    return next((k for k in FUSED_INFER_SCALE_KEYWORDS if k in names), None)


def fused_infer_supported(query: torch.Tensor, key: torch.Tensor, mask: torch.Tensor | None, plain: bool) -> bool:
    """True when this is a decode call (one query token) inside the documented Q_S == 1 limits
    (`plain`: plain_attention_call)."""
    lim = FUSED_INFER_LIMITS
    batch, heads, q_len, head_dim = query.shape
    kv_heads = key.shape[1]
    mask_ok = mask is None or (mask.dim() == 4 and mask.shape[1] == 1 and mask.shape[2] == 1)
    return (
        plain
        and q_len == 1
        and query.dtype in LOW_PRECISION
        and key.dtype == query.dtype
        and mask_ok
        and batch <= lim["max_batch"]
        and heads <= lim["max_heads"]
        and head_dim <= lim["max_head_dim"]
        and key.shape[2] <= lim["max_kv_len"]
        and heads % kv_heads == 0
        and heads // kv_heads <= lim["max_group"]
    )


def fused_infer_attention(scale_keyword: str = "scale") -> AttentionFunction:
    """transformers attention-interface function: decode steps through npu_fused_infer_attention_score
    (BNSD), prefill and everything outside the documented limits through the original attention.

    `scale_keyword` is resolved once when the swap is installed (swap_decode_attention), never per
    call, so a graph capture of the decode step (torchair) has nothing to inspect at run time."""

    def kernel(
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None,
        scale: float,
        causal: bool,
    ) -> torch.Tensor:
        """`causal` is never set here: fused_infer_supported takes one-token queries only."""
        return _npu().npu_fused_infer_attention_score(
            query.contiguous(),
            key.contiguous(),
            value.contiguous(),
            atten_mask=None if mask is None else mask.contiguous(),
            num_heads=query.shape[1],
            num_key_value_heads=key.shape[1],
            input_layout="BNSD",
            **{scale_keyword: scale},
        )[0]

    return npu_attention(fused_infer_supported, kernel)


def swap_attention(
    model: torch.nn.Module, name: str = ATTENTION_NAME, function: Callable[..., Any] = fusion_attention
) -> bool:
    """Register `function` with transformers under `name` and select it for this model only."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "_attn_implementation"):
        return False
    if config._attn_implementation not in (ATTENTION_NAME, FUSED_INFER_NAME):
        setattr(config, ORIGINAL_ATTENTION, config._attn_implementation or "sdpa")
    AttentionInterface.register(name, function)
    # Without a registered mask builder transformers passes no mask at all (padding ignored).
    AttentionMaskInterface.register(name, sdpa_mask)
    setter = getattr(model, "set_attn_implementation", None)
    if callable(setter):
        setter(name)
    else:
        config._attn_implementation = name
    return True


def swap_decode_attention(model: torch.nn.Module) -> bool:
    """Select fused_infer_attention (decode steps on npu_fused_infer_attention_score) for this model,
    with the scale keyword of the installed release; False (nothing changed) when it names neither."""
    keyword = fused_infer_scale_keyword()
    if keyword is None:
        return False
    return swap_attention(model, FUSED_INFER_NAME, fused_infer_attention(keyword))
