"""Module swaps to torch_npu fused operators (Ascend only; construction is testable with a fake).

Signatures follow torch_npu's documentation:
- npu_rms_norm(self, gamma, epsilon=1e-06) -> (y, rstd); fp16/bf16/fp32, gamma same dtype as x,
  x of 1..8 dims (older releases: 2..8).
- npu_swiglu(input, dim=-1) -> swish(A) * B with A, B the two halves of `input` along dim;
  1..8 dims, dim size even, contiguous input; Atlas A2 only.
- npu_rotary_mul(input, r1, r2, rotary_mode='half') -> r1 * x + r2 * rotate_half(x); 4-D x
  (BNSD here), cos/sin broadcast as B1SD, head dim even.
- npu_fusion_attention(query, key, value, head_num, input_layout, *, atten_mask=None, scale=1.,
  keep_prob=1., ...) -> (attention_out, ...); fp16/bf16 only; atten_mask is bool with True =
  masked out, shaped [B,1,S1,S2] / [B,N,S1,S2] / [S1,S2].
Every swap checks these limits per call and falls back to the original code outside them, so a
swap can never change what is computed for shapes the operator does not document.
Swaps that patch a module-level function are switched on per call through a context variable,
so the baseline and the optimized model can run interleaved in one process.
"""

from __future__ import annotations

import contextvars
import sys
import types
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

import torch

ROTARY_ACTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar("ab_npu_rotary", default=False)
ATTENTION_NAME = "ab_npu_fusion_attention"
LOW_PRECISION = (torch.float16, torch.bfloat16)


def _npu() -> Any:
    import torch_npu  # only present in the ascend profile (tests install a FakeTorchNpu)

    return torch_npu


def rms_norm_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """RMSNorm modules with the plain x * rsqrt(mean(x^2) + eps) * weight semantics."""
    found = []
    for module in model.modules():
        name = type(module).__name__
        weight = getattr(module, "weight", None)
        eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
        # Gemma-style norms scale by (1 + weight): not what npu_rms_norm computes.
        if name.endswith("RMSNorm") and "Gemma" not in name and isinstance(weight, torch.nn.Parameter) \
                and weight.dim() == 1 and isinstance(eps, float):
            found.append(module)
    return found


def swap_rms_norm(model: torch.nn.Module) -> int:
    """Route every plain RMSNorm through torch_npu.npu_rms_norm; returns how many were swapped."""
    modules = rms_norm_modules(model)
    for module in modules:
        original = module.forward
        eps = float(getattr(module, "variance_epsilon", getattr(module, "eps", 1e-6)))

        def forward(self: torch.nn.Module, x: torch.Tensor, _orig: Callable = original, _eps: float = eps) -> torch.Tensor:
            if not 1 <= x.dim() <= 8 or x.shape[-1] != self.weight.shape[0]:
                return _orig(x)
            return _npu().npu_rms_norm(x, self.weight.to(x.dtype), epsilon=_eps)[0]

        module.forward = types.MethodType(forward, module)
    return len(modules)


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
    modules = swiglu_modules(model)
    for module in modules:
        original = module.forward

        def forward(self: torch.nn.Module, x: torch.Tensor, _orig: Callable = original) -> torch.Tensor:
            if not 1 <= x.dim() <= 8:
                return _orig(x)
            fused = torch.cat((self.gate_proj(x), self.up_proj(x)), dim=-1).contiguous()
            return self.down_proj(_npu().npu_swiglu(fused, dim=-1))

        module.forward = types.MethodType(forward, module)
    return len(modules)


def rotary_module(model: torch.nn.Module) -> Optional[types.ModuleType]:
    """The model's modeling module when it defines HF's apply_rotary_pos_emb(q, k, cos, sin, ...)."""
    module = sys.modules.get(type(model).__module__)
    fn = getattr(module, "apply_rotary_pos_emb", None)
    return module if callable(fn) else None


def install_rotary(model: torch.nn.Module) -> bool:
    """Patch the modeling module's apply_rotary_pos_emb once; active only inside rotary_active()."""
    module = rotary_module(model)
    if module is None:
        return False
    original = module.apply_rotary_pos_emb
    if getattr(original, "_ab_npu_rotary", False):
        return True

    def apply_rotary_pos_emb(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                             *args: Any, unsqueeze_dim: int = 1, **kwargs: Any) -> Any:
        full = q.dim() == 4 and k.dim() == 4 and cos.shape[-1] == q.shape[-1] == k.shape[-1]
        if not ROTARY_ACTIVE.get() or not full or q.shape[-1] % 2 or unsqueeze_dim != 1 or args or kwargs:
            return original(q, k, cos, sin, *args, unsqueeze_dim=unsqueeze_dim, **kwargs)
        c, s = cos.unsqueeze(1).to(q.dtype), sin.unsqueeze(1).to(q.dtype)  # B1SD against BNSD
        npu = _npu()
        return npu.npu_rotary_mul(q, c, s), npu.npu_rotary_mul(k, c, s)

    apply_rotary_pos_emb._ab_npu_rotary = True  # type: ignore[attr-defined]
    module.apply_rotary_pos_emb = apply_rotary_pos_emb
    return True


@contextmanager
def rotary_active() -> Iterator[None]:
    token = ROTARY_ACTIVE.set(True)
    try:
        yield
    finally:
        ROTARY_ACTIVE.reset(token)


def _repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


def fusion_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     attention_mask: Optional[torch.Tensor], scaling: Optional[float] = None,
                     dropout: float = 0.0, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """transformers attention-interface function (BNSD inputs) backed by npu_fusion_attention."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    heads, q_len, k_len, head_dim = query.shape[1], query.shape[2], key.shape[2], query.shape[3]
    if query.dtype not in LOW_PRECISION or heads % key.shape[1] or (attention_mask is not None and attention_mask.dim() != 4):
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    key, value = _repeat_kv(key, heads // key.shape[1]), _repeat_kv(value, heads // value.shape[1])
    if attention_mask is not None:
        mask = ~attention_mask if attention_mask.dtype == torch.bool else attention_mask < -1.0
        mask = mask[..., :k_len]
    elif getattr(module, "is_causal", False) and q_len > 1:
        mask = torch.ones(q_len, k_len, dtype=torch.bool, device=query.device).triu(1 + k_len - q_len)
    else:
        mask = None
    scale = float(scaling) if scaling is not None else head_dim ** -0.5
    out = _npu().npu_fusion_attention(query.contiguous(), key.contiguous(), value.contiguous(), heads, "BNSD",
                                      atten_mask=mask, scale=scale, keep_prob=1.0)[0]
    return out.transpose(1, 2).contiguous(), None


def swap_attention(model: torch.nn.Module) -> bool:
    """Register fusion_attention with transformers and select it for this model only."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "_attn_implementation"):
        return False
    AttentionInterface.register(ATTENTION_NAME, fusion_attention)
    # Without a registered mask builder transformers passes no mask at all (padding ignored).
    AttentionMaskInterface.register(ATTENTION_NAME, sdpa_mask)
    setter = getattr(model, "set_attn_implementation", None)
    if callable(setter):
        setter(ATTENTION_NAME)
    else:
        config._attn_implementation = ATTENTION_NAME
    return True
