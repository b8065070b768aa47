"""The operator acceptance contract (thresholds: standard.py), run on a replacement.

A replacement is a callable that stands in for a reference computation: a fused operator swap
(ab_runtime/optimize/npu_swaps.py, through its CPU reference path where no NPU is present), a
module an optimization pass puts in place of another, a decomposition the gap report proposes, a
custom operator. `run_contract` feeds both the same inputs: every case's shapes in every dtype,
cycling through the input kinds (normal, non-contiguous, zeros, tiny, large, mixed sign) until at
least MIN_SAMPLES samples; the reference runs in float64 on the very values the replacement got
(rounded to its dtype), and standard.judge decides. `module_contract` does it for a module and
the function that replaces it. The optimization passes call it before a swap takes effect
(`swap_verdict`, `rotary_verdict`: once per replacement, module class, dtype and device per
process), and do not apply a replacement it refuses (ReplacementRefused).

    python -m ab_runtime.ops.acceptance      (the npu_swaps' replacements on small modules, one JSON line)
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from collections.abc import Callable
from typing import Any

import torch

from ..outputs import tensors_in
from . import standard

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
KINDS = ("normal", "non_contiguous", "zeros", "tiny", "large", "mixed")
SCALES = {"normal": 1.0, "non_contiguous": 1.0, "zeros": 0.0, "tiny": 1e-4, "large": 1e3, "mixed": 10.0}
LARGE_FLOAT16 = 30.0  # float16 tops out at 65504: a product of two large inputs must stay finite
Shapes = tuple[tuple[int, ...], ...]  # the shapes of one call's tensor inputs
_VERDICTS: dict[tuple[str, ...], dict[str, Any]] = {}  # the passes' verdicts, once per process


class ReplacementRefused(Exception):
    """Every module a pass would replace failed the contract: the pass is not applied."""


def make_input(shape: tuple[int, ...], kind: str, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """One input of `kind` in `dtype`; non_contiguous inputs have the same values, other strides."""
    scale = LARGE_FLOAT16 if kind == "large" and dtype == torch.float16 else SCALES[kind]
    values = torch.randn(shape, generator=gen, dtype=torch.float64) * scale
    if kind == "mixed":  # signs mixed with exact zeros and a few values a thousand times larger
        values = values * (torch.rand(shape, generator=gen, dtype=torch.float64) > 0.2)
        values = values * torch.where(torch.rand(shape, generator=gen, dtype=torch.float64) > 0.95, 1e3, 1.0)
    x = values.to(dtype)
    if kind == "non_contiguous":
        wide = torch.zeros(*shape[:-1], 2 * shape[-1], dtype=dtype) if shape else x
        if shape:
            wide[..., ::2] = x
            x = wide[..., ::2]  # every other element of a wider row: same values, stride 2
        assert not shape or shape[-1] < 2 or not x.is_contiguous()
    return x


def sample_metrics(out: Any, ref: Any, dtype: str) -> dict[str, Any]:
    """max abs error, MERE, MARE, RMSE and the share within atol + rtol * |ref|, over all outputs."""
    limit = standard.thresholds(dtype)
    got = torch.cat([t.detach().cpu().to(torch.float64).reshape(-1) for t in tensors_in(out)])
    want = torch.cat([t.detach().cpu().to(torch.float64).reshape(-1) for t in tensors_in(ref)])
    if got.shape != want.shape:
        return {
            "max_abs": math.inf,
            "mere": math.inf,
            "mare": math.inf,
            "rmse": math.inf,
            "within_share": 0.0,
            "finite": False,
        }
    finite = bool(torch.isfinite(got[torch.isfinite(want)]).all())
    diff = (got - want).abs()
    rel = diff / (want.abs() + limit["atol"])
    within = (diff <= limit["atol"] + limit["rtol"] * want.abs()).double().mean()
    safe = lambda t: float(t) if math.isfinite(float(t)) else math.inf  # noqa: E731
    return {
        "max_abs": safe(diff.max()) if diff.numel() else 0.0,
        "mere": safe(rel.mean()) if rel.numel() else 0.0,
        "mare": safe(rel.max()) if rel.numel() else 0.0,
        "rmse": safe(diff.pow(2).mean().sqrt()) if diff.numel() else 0.0,
        "within_share": float(within) if diff.numel() else 1.0,
        "finite": finite,
    }


def run_contract(
    name: str,
    candidate_for: Callable[[torch.dtype], Callable[..., Any]],
    reference: Callable[..., Any],
    cases: list[Shapes],
    dtypes: list[str],
    seed: int = 0,
    baseline_for: Callable[[torch.dtype], Callable[..., Any]] | None = None,
    device: torch.device | None = None,
) -> dict[str, Any]:
    """The contract's verdict for one replacement (`candidate_for(dtype)` -> the replacement in
    that dtype; `reference` runs in float64 on the CPU; `baseline_for(dtype)`, when given, the
    computation it replaces in that dtype, standard.py's baseline rule). On a `device` other than
    the CPU the candidate and baseline get the inputs copied there (a copy is contiguous: the
    non-contiguous samples then test the CPU-side values only)."""
    if not cases or not dtypes:
        raise ValueError(f"{name}: the contract needs at least one case and one dtype")
    gen = torch.Generator().manual_seed(seed)
    candidates = {d: candidate_for(DTYPES[d]) for d in dtypes}
    baselines = {d: baseline_for(DTYPES[d]) for d in dtypes} if baseline_for is not None else {}
    samples: list[dict[str, Any]] = []
    step = 0
    with torch.no_grad():
        while len(samples) < standard.MIN_SAMPLES or step < len(KINDS):
            for shapes in cases:
                for dtype in dtypes:
                    kind = KINDS[step % len(KINDS)]
                    inputs = [make_input(shape, kind, DTYPES[dtype], gen) for shape in shapes]
                    ref = reference(*[x.to(torch.float64) for x in inputs])
                    if device is not None and device.type != "cpu":
                        inputs = [x.to(device) for x in inputs]
                    out = candidates[dtype](*inputs)
                    sample = {
                        "index": len(samples),
                        "kind": kind,
                        "dtype": dtype,
                        "shape": " x ".join(str(list(s)) for s in shapes),
                        **sample_metrics(out, ref, dtype),
                    }
                    if dtype in baselines:
                        sample["baseline"] = sample_metrics(baselines[dtype](*inputs), ref, dtype)
                    samples.append(sample)
            step += 1
    verdict = standard.judge(samples)
    failed = [s for s in samples if standard.sample_problems(s)]
    return {
        "replacement": name,
        **verdict,
        "dtypes": dtypes,
        "cases": [list(map(list, c)) for c in cases],
        "failed_samples": failed[:5],
    }


def module_contract(
    name: str,
    original: torch.nn.Module,
    replace: Callable[[torch.nn.Module], Any],
    cases: list[Shapes],
    dtypes: list[str],
    seed: int = 0,
    device: torch.device | None = None,
) -> dict[str, Any]:
    """The contract for a module and the function that swaps its computation (`replace(module)`
    edits a copy in place): the swapped copy in each dtype (on `device`, default the CPU) against
    the original in float64 on the CPU, the original in that dtype as the baseline."""
    where = device or torch.device("cpu")
    reference = copy.deepcopy(original).to(device="cpu", dtype=torch.float64).eval()

    def baseline_for(dtype: torch.dtype) -> Callable[..., Any]:
        return copy.deepcopy(original).to(device=where, dtype=dtype).eval()

    def candidate_for(dtype: torch.dtype) -> Callable[..., Any]:
        module = copy.deepcopy(original).to(device=where, dtype=dtype).eval()
        replace(module)
        return module

    return run_contract(name, candidate_for, reference, cases, dtypes, seed, baseline_for, where)


def hidden_cases(hidden: int) -> list[Shapes]:
    """The shapes a per-token module (a norm, an MLP) of width `hidden` is judged on: a prefill
    batch, a decode step and a flat batch of tokens."""
    return [((2, 7, hidden),), ((1, 1, hidden),), ((3, hidden),)]


def cached_verdict(
    replacement: str, judged: str, dtype: str, device: torch.device, run: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """`run()`'s verdict on `replacement` for `judged` (a module class or function, qualified) in
    `dtype` on `device`, once per process (with the seconds it took); later calls get the stored
    verdict marked `cached`, so a search that builds a pass many times pays once."""
    key = (replacement, judged, dtype, device.type)
    if key in _VERDICTS:
        return {**_VERDICTS[key], "cached": True}
    start = time.perf_counter()
    verdict = {**run(), "pass": replacement, "judged": judged, "dtype": dtype, "device": device.type}
    verdict.update(seconds=round(time.perf_counter() - start, 4), cached=False)
    _VERDICTS[key] = verdict
    return verdict


def qualified(obj: Any) -> str:
    """A class's or function's module-qualified name (what a verdict is cached under)."""
    return f"{obj.__module__}.{obj.__qualname__}"


def dtype_of(module: torch.nn.Module) -> tuple[str, torch.device]:
    """The dtype name and device a module computes in (its first floating parameter's)."""
    param = next((p for p in module.parameters() if p.is_floating_point()), None)
    if param is None or param.dtype not in DTYPES.values():
        raise ValueError(f"{type(module).__name__}: no float32 / float16 / bfloat16 parameter to judge a swap in")
    return next(k for k, v in DTYPES.items() if v == param.dtype), param.device


def swap_verdict(
    replacement: str, module: torch.nn.Module, swap: Callable[[torch.nn.Module], Any], hidden: int
) -> dict[str, Any]:
    """The contract for a pass's module swap (`swap(module)` replaces that module's computation),
    once per replacement, module class, dtype and device per process: on the CPU through the
    swaps' CPU reference paths (npu_swaps.cpu_reference_ops), elsewhere the device's operator."""
    dtype, device = dtype_of(module)
    return cached_verdict(
        replacement,
        qualified(type(module)),
        dtype,
        device,
        lambda: module_contract(
            f"{replacement} on {type(module).__name__}",
            module,
            _swapped(swap, device),
            hidden_cases(hidden),
            [dtype],
            device=device,
        ),
    )


def _swapped(swap: Callable[[torch.nn.Module], Any], device: torch.device) -> Callable[[torch.nn.Module], None]:
    """`swap` applied to a module copy; on the CPU its fused calls go to the CPU reference paths."""

    def replace(module: torch.nn.Module) -> None:
        swap(module)
        if device.type == "cpu":
            module.forward = _under_reference(module.forward)

    return replace


def _under_reference(fn: Callable[..., Any]) -> Callable[..., Any]:
    from ..optimize import npu_swaps

    def call(*args: Any) -> Any:
        with npu_swaps.cpu_reference_ops():
            return fn(*args)

    return call


def swap_contracts(
    dtypes: tuple[str, ...] = ("float32", "bfloat16", "float16"), hidden: int = 64
) -> list[dict[str, Any]]:
    """The contract for each fused swap of ab_runtime/optimize/npu_swaps.py, on small Llama modules,
    through the swaps' CPU reference paths (on an NPU host the same swaps call torch_npu)."""
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama

    from ..optimize import npu_swaps

    config = LlamaConfig(hidden_size=hidden, intermediate_size=2 * hidden, num_attention_heads=1, hidden_act="silu")
    torch.manual_seed(0)
    norm = modeling_llama.LlamaRMSNorm(hidden, eps=1e-6)
    torch.nn.init.normal_(norm.weight, 1.0, 0.1)
    mlp = modeling_llama.LlamaMLP(config)
    cases, cpu = hidden_cases(hidden), torch.device("cpu")
    results = [
        module_contract(
            "npu_rms_norm (swap_rms_norm)", norm, _swapped(npu_swaps.swap_rms_norm, cpu), cases, list(dtypes)
        ),
        module_contract("npu_swiglu (swap_swiglu)", mlp, _swapped(npu_swaps.swap_swiglu, cpu), cases, list(dtypes)),
    ]
    before = modeling_llama.apply_rotary_pos_emb
    original = getattr(before, "_ab_original", before)  # unpatched, whether or not a pass patched it already
    npu_swaps.install_rotary(norm)  # patches modeling_llama.apply_rotary_pos_emb, active in rotary_active()
    results.append(rotary_contract("npu_rotary_mul (install_rotary)", modeling_llama, original, list(dtypes), cpu))
    return results


def rotary_contract(
    name: str, modeling: Any, original: Callable[..., Any], dtypes: list[str], device: torch.device, heads: int = 2
) -> dict[str, Any]:
    """The contract for install_rotary's patched `modeling.apply_rotary_pos_emb` (the swap is on
    inside rotary_active()) against `original`, the function it patched, on BNSD q and k of the
    documented head dim; on the CPU through the CPU reference paths."""
    from ..optimize import npu_swaps

    patched = modeling.apply_rotary_pos_emb
    reference_ops = npu_swaps.cpu_reference_ops if device.type == "cpu" else contextlib.nullcontext

    def rotary(dtype: torch.dtype) -> Callable[..., Any]:
        def call(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> Any:
            with npu_swaps.rotary_active(), reference_ops():
                return patched(q, k, cos, sin)

        return call

    d = npu_swaps.ROTARY_LIMITS["head_dim"]
    cases: list[Shapes] = [
        ((1, heads, 8, d), (1, heads, 8, d), (1, 8, d), (1, 8, d)),
        ((2, heads, 16, d), (2, heads, 16, d), (2, 16, d), (2, 16, d)),
    ]
    return run_contract(name, rotary, original, cases, dtypes, baseline_for=lambda dtype: original, device=device)


def rotary_verdict(
    modeling: Any, original: Callable[..., Any], dtype: str, device: torch.device, heads: int
) -> dict[str, Any]:
    """rotary_contract once per modeling module, dtype and device per process (the pass's check).
    Cached under the modeling module's name: since transformers 5.25 `original` may be a kernels
    wrapper (an nn.Module instance, no `__qualname__`) rather than a function."""
    return cached_verdict(
        "npu_rotary_mul",
        f"{modeling.__name__}.apply_rotary_pos_emb",
        dtype,
        device,
        lambda: rotary_contract(
            f"npu_rotary_mul on {modeling.__name__}.apply_rotary_pos_emb", modeling, original, [dtype], device, heads
        ),
    )


def attention_module(model: torch.nn.Module) -> torch.nn.Module | None:
    """The model's first attention module of transformers' attention interface (an `...Attention`
    with its `config` and an integer `head_dim`), on which an attention swap is judged."""
    return next(
        (
            m
            for m in model.modules()
            if type(m).__name__.endswith("Attention")
            and hasattr(m, "config")
            and isinstance(getattr(m, "head_dim", None), int)
        ),
        None,
    )


def attention_swap(
    replacement: str, model: torch.nn.Module, swap: Callable[[torch.nn.Module], bool]
) -> dict[str, Any] | None:
    """`swap(model)` selects a fused attention function for the model (npu_swaps.swap_attention,
    swap_decode_attention); the contract then judges that function against the attention the model
    had, on its first attention module's heads (a prefill and a decode step, no padding), once per
    replacement, attention class, dtype and device per process, on the CPU through the CPU
    reference paths. A refusal puts the model's attention back and raises ReplacementRefused (no
    call has run the swap yet); None when `swap` changed nothing."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    from ..optimize import npu_swaps

    module = attention_module(model)
    if module is None:
        raise ReplacementRefused(f"{replacement}: no attention module (transformers' attention interface) to judge")
    if not swap(model):
        return None
    config, (dtype, device) = model.config, dtype_of(model)
    fused, original = ALL_ATTENTION_FUNCTIONS[config._attn_implementation], npu_swaps.original_attention(module)
    scaling = float(getattr(module, "scaling", module.head_dim**-0.5))
    heads = int(config.num_attention_heads)
    kv_heads, d = int(getattr(config, "num_key_value_heads", None) or heads), module.head_dim
    reference_ops = npu_swaps.cpu_reference_ops if device.type == "cpu" else contextlib.nullcontext

    def calling(fn: Callable[..., Any], ops: Callable[[], Any]) -> Callable[..., Any]:
        def call(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Any:
            with ops():
                return fn(module, q, k, v, None, scaling=scaling, dropout=0.0)[0]

        return call

    cases: list[Shapes] = [
        ((2, heads, 7, d), (2, kv_heads, 7, d), (2, kv_heads, 7, d)),
        ((1, heads, 1, d), (1, kv_heads, 9, d), (1, kv_heads, 9, d)),
    ]
    verdict = cached_verdict(
        replacement,
        qualified(type(module)),
        dtype,
        device,
        lambda: run_contract(
            f"{replacement} on {type(module).__name__}",
            lambda _: calling(fused, reference_ops),
            calling(original, contextlib.nullcontext),
            cases,
            [dtype],
            baseline_for=lambda _: calling(original, contextlib.nullcontext),
            device=device,
        ),
    )
    if not verdict["accepted"]:
        before = getattr(config, npu_swaps.ORIGINAL_ATTENTION)
        setter = getattr(model, "set_attn_implementation", None)
        if callable(setter):
            setter(before)
        else:
            config._attn_implementation = before
        raise ReplacementRefused(
            f"{replacement}: {type(module).__name__} attention refused by the operator acceptance "
            f"contract: {'; '.join(verdict['reasons'])}"
        )
    return verdict


def print_verdicts(results: list[dict[str, Any]]) -> int:
    """The verdicts as one JSON line (without the failing samples); exit 0 when all were accepted."""
    import json

    print(json.dumps([{k: v for k, v in r.items() if k != "failed_samples"} for r in results]), flush=True)
    return 0 if all(r["accepted"] for r in results) else 1


def main(argv: list[str]) -> int:
    return print_verdicts(swap_contracts())


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
