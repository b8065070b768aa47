"""The operator acceptance contract (thresholds: standard.py), run on a replacement.

A replacement is a callable that stands in for a reference computation: a fused operator swap
(ab_runtime/optimize/npu_swaps.py, through its CPU reference path where no NPU is present), a
module an optimization pass puts in place of another, a decomposition the gap report proposes, a
custom operator. `run_contract` feeds both the same inputs: every case's shapes in every dtype,
cycling through the input kinds (normal, non-contiguous, zeros, tiny, large, mixed sign) until at
least MIN_SAMPLES samples; the reference runs in float64 on the very values the replacement got
(rounded to its dtype), and standard.judge decides. `module_contract` does it for a module and
the function that replaces it.

    python -m ab_runtime.ops.acceptance      (the npu_swaps' replacements on small modules, one JSON line)
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import torch

from . import standard
from .record import tensors_in

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
KINDS = ("normal", "non_contiguous", "zeros", "tiny", "large", "mixed")
SCALES = {"normal": 1.0, "non_contiguous": 1.0, "zeros": 0.0, "tiny": 1e-4, "large": 1e3, "mixed": 10.0}
LARGE_FLOAT16 = 30.0  # float16 tops out at 65504: a product of two large inputs must stay finite
Shapes = tuple[tuple[int, ...], ...]  # the shapes of one call's tensor inputs


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
    got = torch.cat([t.detach().to(torch.float64).reshape(-1) for t in tensors_in(out)])
    want = torch.cat([t.detach().to(torch.float64).reshape(-1) for t in tensors_in(ref)])
    if got.shape != want.shape:
        return {"max_abs": math.inf, "mere": math.inf, "mare": math.inf, "rmse": math.inf, "within_share": 0.0,
                "finite": False}
    finite = bool(torch.isfinite(got[torch.isfinite(want)]).all())
    diff = (got - want).abs()
    rel = diff / (want.abs() + limit["atol"])
    within = (diff <= limit["atol"] + limit["rtol"] * want.abs()).double().mean()
    safe = lambda t: float(t) if math.isfinite(float(t)) else math.inf  # noqa: E731
    return {"max_abs": safe(diff.max()) if diff.numel() else 0.0, "mere": safe(rel.mean()) if rel.numel() else 0.0,
            "mare": safe(rel.max()) if rel.numel() else 0.0,
            "rmse": safe(diff.pow(2).mean().sqrt()) if diff.numel() else 0.0,
            "within_share": float(within) if diff.numel() else 1.0, "finite": finite}


def run_contract(name: str, candidate_for: Callable[[torch.dtype], Callable[..., Any]],
                 reference: Callable[..., Any], cases: list[Shapes], dtypes: list[str], seed: int = 0,
                 baseline_for: Callable[[torch.dtype], Callable[..., Any]] | None = None) -> dict[str, Any]:
    """The contract's verdict for one replacement (`candidate_for(dtype)` -> the replacement in
    that dtype; `reference` runs in float64; `baseline_for(dtype)`, when given, the computation
    it replaces in that dtype, standard.py's baseline rule)."""
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
                    out = candidates[dtype](*inputs)
                    sample = {"index": len(samples), "kind": kind, "dtype": dtype,
                              "shape": " x ".join(str(list(s)) for s in shapes), **sample_metrics(out, ref, dtype)}
                    if dtype in baselines:
                        sample["baseline"] = sample_metrics(baselines[dtype](*inputs), ref, dtype)
                    samples.append(sample)
            step += 1
    verdict = standard.judge(samples)
    failed = [s for s in samples if standard.sample_problems(s)]
    return {"replacement": name, **verdict, "dtypes": dtypes, "cases": [list(map(list, c)) for c in cases],
            "failed_samples": failed[:5]}


def module_contract(name: str, original: torch.nn.Module, replace: Callable[[torch.nn.Module], Any],
                    cases: list[Shapes], dtypes: list[str], seed: int = 0) -> dict[str, Any]:
    """The contract for a module and the function that swaps its computation (`replace(module)`
    edits a copy in place): the swapped copy in each dtype against the original in float64, the
    original in that dtype as the baseline."""
    reference = copy.deepcopy(original).to(torch.float64).eval()

    def baseline_for(dtype: torch.dtype) -> Callable[..., Any]:
        return copy.deepcopy(original).to(dtype).eval()

    def candidate_for(dtype: torch.dtype) -> Callable[..., Any]:
        module = copy.deepcopy(original).to(dtype).eval()
        replace(module)
        return module

    return run_contract(name, candidate_for, reference, cases, dtypes, seed, baseline_for)


def _under_reference(fn: Callable[..., Any]) -> Callable[..., Any]:
    from ..optimize import npu_swaps

    def call(*args: Any) -> Any:
        with npu_swaps.cpu_reference_ops():
            return fn(*args)

    return call


def swap_contracts(dtypes: tuple[str, ...] = ("float32", "bfloat16", "float16"), hidden: int = 64) -> list[dict[str, Any]]:
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
    cases: list[Shapes] = [((2, 7, hidden),), ((1, 1, hidden),), ((3, hidden),)]

    def swapped(swap: Callable[[torch.nn.Module], Any]) -> Callable[[torch.nn.Module], None]:
        def replace(module: torch.nn.Module) -> None:
            swap(module)
            module.forward = _under_reference(module.forward)
        return replace

    results = [module_contract("npu_rms_norm (swap_rms_norm)", norm, swapped(npu_swaps.swap_rms_norm), cases,
                               list(dtypes)),
               module_contract("npu_swiglu (swap_swiglu)", mlp, swapped(npu_swaps.swap_swiglu), cases, list(dtypes))]
    original = modeling_llama.apply_rotary_pos_emb
    npu_swaps.install_rotary(norm)  # patches modeling_llama.apply_rotary_pos_emb, active in rotary_active()
    patched = modeling_llama.apply_rotary_pos_emb

    def rotary(dtype: torch.dtype) -> Callable[..., Any]:
        def call(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> Any:
            with npu_swaps.rotary_active(), npu_swaps.cpu_reference_ops():
                return patched(q, k, cos, sin)
        return call

    d = npu_swaps.ROTARY_LIMITS["head_dim"]
    rotary_cases: list[Shapes] = [((1, 2, 8, d), (1, 2, 8, d), (1, 8, d), (1, 8, d))]
    results.append(run_contract("npu_rotary_mul (install_rotary)", rotary, original, rotary_cases, list(dtypes),
                                baseline_for=lambda dtype: original))
    return results


def main(argv: list[str]) -> int:
    import json

    results = swap_contracts()
    print(json.dumps([{k: v for k, v in r.items() if k != "failed_samples"} for r in results]), flush=True)
    return 0 if all(r["accepted"] for r in results) else 1


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
