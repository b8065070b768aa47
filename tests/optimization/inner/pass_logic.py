"""Pass applicability and construction checks, run in the shared torch env (prints one JSON).

    python pass_logic.py ADAPTATION_RUNTIME_PARENT

NPU and CUDA passes are NOT measured here (no such device): their applicability rules are
evaluated on CPU-built models with device traits set to npu/cuda, and the NPU module swaps are
constructed against FakeTorchNpu, a pure-torch stand-in for the four torch_npu operators that
follows their documented semantics, so a swapped model must reproduce the original's outputs.
"""

from __future__ import annotations

import json
import os
import sys
import types

sys.path.insert(0, sys.argv[1])

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, ViTConfig, ViTForImageClassification


class FakeTorchNpu(types.ModuleType):
    """Pure-torch doubles of torch_npu's fused operators (documented formulas); counts calls."""

    def __init__(self) -> None:
        super().__init__("torch_npu")
        self.calls: dict[str, int] = {}
        self.npu = FakeNpuModule()
        self.last_attention: dict = {}

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def npu_rms_norm(self, x, gamma, epsilon=1e-6):
        self._count("npu_rms_norm")
        assert gamma.dtype == x.dtype, "documented: gamma has x's dtype"
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + epsilon)
        return (xf * rstd).to(x.dtype) * gamma, rstd

    def npu_swiglu(self, x, dim=-1):
        self._count("npu_swiglu")
        assert x.is_contiguous(), "documented: contiguous input only"
        a, b = x.chunk(2, dim=dim)
        return torch.nn.functional.silu(a) * b

    def npu_rotary_mul(self, x, r1, r2, rotary_mode="half"):
        self._count("npu_rotary_mul")
        assert x.dim() == 4 and rotary_mode == "half"
        x1, x2 = x.chunk(2, -1)
        return r1 * x + r2 * torch.cat((-x2, x1), dim=-1)

    def npu_fusion_attention(
        self, q, k, v, head_num, input_layout, *, atten_mask=None, scale=1.0, keep_prob=1.0, sparse_mode=0, **kw
    ):
        self._count("npu_fusion_attention")
        assert input_layout == "BNSD" and q.dtype in (torch.float16, torch.bfloat16) and q.shape[1] == head_num
        assert head_num % k.shape[1] == 0, "documented: N_q must be a multiple of N_kv"
        self.last_attention = {
            "q_heads": q.shape[1],
            "kv_heads": k.shape[1],
            "sparse_mode": sparse_mode,
            "mask_shape": list(atten_mask.shape) if atten_mask is not None else None,
        }
        groups = head_num // k.shape[1]  # native GQA: the kernel groups query heads itself
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        scores = (q.float() @ k.float().transpose(-1, -2)) * scale
        if sparse_mode in (2, 3):
            assert atten_mask is not None and tuple(atten_mask.shape) == (2048, 2048), "documented compressed mask"
            s1, s2 = q.shape[2], k.shape[2]
            atten_mask = torch.ones(s1, s2, dtype=torch.bool).triu(1 if sparse_mode == 2 else 1 + s2 - s1)
        if atten_mask is not None:
            scores = scores.masked_fill(atten_mask, float("-inf"))  # True = masked out (documented)
        weights = torch.softmax(scores, -1).nan_to_num(0.0)  # a fully masked (padding) row attends nothing
        return (weights @ v.float()).to(q.dtype), None, None


class FakeNpuModule(types.ModuleType):
    """torch_npu.npu: the documented compile-mode switch and its query."""

    def __init__(self) -> None:
        super().__init__("torch_npu.npu")
        self.jit_compile = True

    def set_compile_mode(self, jit_compile: bool) -> None:
        self.jit_compile = bool(jit_compile)

    def is_jit_compile_false(self) -> bool:
        return not self.jit_compile


def tiny_llama(dtype=torch.float32):
    """Head dim 128 (inside npu_rotary_mul's documented limits), grouped-query attention 4:2."""
    heads = dict(hidden_size=512, num_attention_heads=4, num_key_value_heads=2)
    cfg = LlamaConfig(intermediate_size=128, num_hidden_layers=2, vocab_size=128, max_position_embeddings=64, **heads)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa").eval().to(dtype)


def forced_probe(passes) -> dict:
    """What ASCENDBRIDGE_CPU_BF16 makes the probe, the GEMM micro-benchmark and model_traits report."""
    from ab_runtime.errors import RuntimeDiagnosis

    saved, result = os.environ.get(passes.CPU_BF16_ENV), {}
    try:
        for value in passes.CPU_BF16_CHOICES:
            os.environ[passes.CPU_BF16_ENV] = value
            traits = passes.model_traits(tiny_llama(), "cpu", "causal_lm", "float32")
            result[value] = {
                "native": passes.cpu_bf16_native(),
                "traits_native": traits.cpu_bf16_native,
                "gemm_speedup": passes.cpu_bf16_gemm_speedup(),
            }
        os.environ[passes.CPU_BF16_ENV] = "avx512"
        try:
            passes.cpu_bf16_native()
            result["bad"] = None
        except RuntimeDiagnosis as exc:
            result["bad"] = str(exc)
    finally:
        os.environ.pop(passes.CPU_BF16_ENV, None)
        if saved is not None:
            os.environ[passes.CPU_BF16_ENV] = saved
    return result


def main() -> None:
    from ab_runtime import build as ab_build
    from ab_runtime.optimize import npu_swaps, passes

    out: dict = {"not_measured": "NPU/CUDA passes: applicability and construction only, no timing on this CPU"}
    out["catalogue"] = passes.catalogue_table()
    llama = tiny_llama()
    vit = ViTForImageClassification(
        ViTConfig(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            image_size=32,
            patch_size=8,
        )
    ).eval()
    applies = {}
    for label, model, device, dtype, bf16 in (
        ("llama_cpu_fast_bf16", llama, "cpu", "float32", 4.0),
        ("llama_cpu_slow_bf16", llama, "cpu", "float32", 1.0),
        ("llama_cpu_bf16_baseline", llama, "cpu", "bfloat16", 4.0),
        ("vit_cpu", vit, "cpu", "float32", 4.0),
        ("llama_npu_fp32", llama, "npu", "float32", None),
        ("llama_npu_bf16", llama, "npu", "bfloat16", None),
        ("vit_npu_bf16", vit, "npu", "bfloat16", None),
        ("llama_cuda", llama, "cuda", "float32", None),
    ):
        traits = passes.model_traits(model, device, "causal_lm", dtype, bf16, bf16_native=False)
        applies[label] = {p.name: p.applies(traits) for p in passes.for_device(device)}
    native = passes.model_traits(llama, "cpu", "causal_lm", "float32", 1.0, bf16_native=True)
    applies["llama_cpu_native_bf16"] = {p.name: p.applies(native) for p in passes.for_device("cpu")}
    out["applies"] = applies
    import dataclasses

    narrow = dataclasses.replace(passes.model_traits(llama, "npu", "causal_lm", "bfloat16"), head_dim=64)
    out["rotary_head_dim_64"] = passes.BY_NAME["npu_rotary_mul"].applies(narrow)
    out["probe"] = forced_probe(passes)

    fake = FakeTorchNpu()
    sys.modules["torch_npu"] = fake
    ids = torch.randint(0, 128, (2, 12))
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, :3] = 0  # left padding exercises the attention mask conversion
    swaps = {}
    for name, dtype in (
        ("npu_rms_norm", torch.float32),
        ("npu_swiglu", torch.float32),
        ("npu_rotary_mul", torch.float32),
        ("npu_fusion_attention", torch.bfloat16),
    ):
        original = tiny_llama(dtype)
        with torch.inference_mode():
            want = original(input_ids=ids, attention_mask=mask).logits.float()
        fake.calls.clear()
        b = passes.build(tiny_llama(dtype), passes.get([name]), "cpu", dtype)
        run = ab_build.finalize(b, {})
        with torch.inference_mode():
            got = run({"input_ids": ids, "attention_mask": mask}).logits.float()
        valid = mask.bool()
        swaps[name] = {
            "calls": dict(fake.calls),
            "notes": b.notes,
            "max_abs_diff": float((got - want)[valid].abs().max()),
            "scale": float(want.abs().max()),
        }
        if name == "npu_rotary_mul":  # outside rotary_active() the patched function is the original
            fake.calls.clear()
            with torch.inference_mode():
                original(input_ids=ids, attention_mask=mask)
            swaps[name]["calls_from_unoptimized_model"] = dict(fake.calls)
        if name == "npu_fusion_attention":
            swaps[name]["padded_call"] = dict(fake.last_attention)
            with torch.inference_mode():  # no padding: transformers passes no mask, the causal default applies
                want = original(input_ids=ids).logits.float()
                got = run({"input_ids": ids}).logits.float()
            swaps[name]["causal_call"] = dict(fake.last_attention)
            swaps[name]["causal_max_abs_diff"] = float((got - want).abs().max())
            eager = tiny_llama(dtype)
            eager.set_attn_implementation("eager")  # the model's own code is what the swap falls back to
            attention = passes.build(eager, passes.get([name]), "cpu", dtype).model.model.layers[0].self_attn
            q = torch.randn(1, 4, 5, 128, dtype=dtype)
            kv = torch.randn(1, 2, 5, 128, dtype=dtype)
            before = fake.calls.get("npu_fusion_attention", 0)
            for extra in ({"softcap": 30.0}, {"s_aux": torch.zeros(4)}):  # Gemma-2 soft-capping, gpt-oss sinks
                npu_swaps.fusion_attention(attention, q, kv, kv, None, scaling=0.1, **extra)
            swaps[name]["fused_calls_with_softcap_or_sinks"] = fake.calls.get("npu_fusion_attention", 0) - before
    out["swaps"] = swaps
    jit = {}
    for default in (True, False):  # the process default must survive the pass's calls
        fake.npu.set_compile_mode(jit_compile=default)
        b = passes.build(tiny_llama(), passes.get(["npu_jit_compile_off"]), "npu", torch.float32)
        with b.contexts[0]():
            inside = fake.npu.jit_compile
        jit[str(default)] = {"inside": inside, "after": fake.npu.jit_compile}
    out["jit"] = jit

    cuda = {}
    for name in ("cuda_fp16", "cuda_bf16", "cuda_sdpa", "cuda_tf32", "cuda_compile_cudagraphs"):
        model = tiny_llama()
        model.set_attn_implementation("eager")
        b = passes.build(model, passes.get([name]), "cuda", torch.float32)  # built, never run: no GPU here
        cuda[name] = {
            "param_dtype": str(next(b.model.parameters()).dtype),
            "accuracy_dtype": b.accuracy_dtype,
            "attn": b.model.config._attn_implementation,
            "compile": b.compile_kwargs,
            "contexts": len(b.contexts),
        }
    out["cuda"] = cuda
    tq = passes.build(tiny_llama(), passes.get(["npu_task_queue"]), "npu", torch.float32)
    out["npu_task_queue_env"] = tq.env
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
