"""Decode-pass checks, run in the shared torch env (prints one JSON line).

    python decode_logic.py ADAPTATION_RUNTIME_PARENT DEMO_CONFIG_JSON

The demo tiny-llama config (one layer) generates 4 tokens after a 5-token prompt, batch 2 with
left padding, so the attention mask reaches every decode step.

The CPU pass (static KV cache + torch.compile, inductor) really runs and is compared token by
token with eager greedy generation. NPU passes are NOT measured (no NPU here): torch_npu and
torchair are replaced by test doubles that follow their documented APIs -
FakeDecodeTorchNpu.npu_fused_infer_attention_score computes the documented formula with the 7.0.0
(`scale`) or 6.0.0 (`scale_value`) keyword, and FakeTorchair's get_npu_backend returns a backend
that runs the captured FX graph as it is, so graph capture of the static-cache decode step is real.
"""

from __future__ import annotations

import inspect
import json
import sys
import types
from typing import Any

sys.path.insert(0, sys.argv[1])

import torch
from transformers import AutoModelForCausalLM, LlamaConfig

PROMPT, NEW, BATCH = 5, 4, 2


class FakeDecodeTorchNpu(types.ModuleType):
    """torch_npu double: npu_fused_infer_attention_score with one release's keyword; counts calls."""

    def __init__(self, keyword: str | None, count: bool = True) -> None:
        super().__init__("torch_npu")
        self.log: list[int] = []
        self.count = count  # off under graph capture: dynamo guards on the log and would recompile per call
        self.keyword = keyword
        if keyword is None:  # an operator that names neither

            def op(query, key, value, *, atten_mask=None, num_heads=1, input_layout="BSH", **kw):
                raise AssertionError("must not be called")
        else:  # `scale`: the 7.0.0 signature, `scale_value`: 6.0.0 / 6.0.RC3 (the keyword-only part the swap uses)
            defaults = dict(atten_mask=None, num_heads=1, input_layout="BSH", num_key_value_heads=0, **{keyword: 1.0})

            def op(query, key, value, **kw):
                return self._attention(query, key, value, {**defaults, **kw})

            op.__signature__ = inspect.Signature(  # what the swap reads the keyword from
                [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in ("query", "key", "value")]
                + [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d) for n, d in defaults.items()]
                + [inspect.Parameter("kw", inspect.Parameter.VAR_KEYWORD)]
            )
        self.npu_fused_infer_attention_score = op

    def _attention(self, q, k, v, given: dict[str, Any]):
        mask, num_heads, scale = given["atten_mask"], given["num_heads"], given[self.keyword]
        layout, kv_heads = given["input_layout"], given["num_key_value_heads"]
        if self.count:
            self.log.append(1)
        assert layout == "BNSD" and q.shape[2] == 1 and q.shape[1] == num_heads and k.shape[1] == kv_heads
        assert q.dtype in (torch.float16, torch.bfloat16) and q.is_contiguous()
        assert mask is None or (mask.dtype == torch.bool and tuple(mask.shape) == (q.shape[0], 1, 1, k.shape[2]))
        groups = num_heads // kv_heads
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        scores = (q.float() @ k.float().transpose(-1, -2)) * scale
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))  # True = not computed (documented)
        return (torch.softmax(scores, -1) @ v.float()).to(q.dtype), torch.zeros(1)


class FakeTorchair(types.ModuleType):
    """torchair double: CompilerConfig (with `mode` or, like older releases, without) and
    get_npu_backend(compiler_config=...) returning a backend that runs the FX graph as captured."""

    def __init__(self, has_mode: bool) -> None:
        super().__init__("torchair")
        self.graphs = 0
        self.modes: list[str | None] = []
        fake = self

        class CompilerConfig:
            def __init__(self) -> None:
                if has_mode:
                    self.mode = "max-autotune"  # the documented default

        self.CompilerConfig = CompilerConfig

        def get_npu_backend(*, compiler_config=None, custom_decompositions=None):
            fake.modes.append(getattr(compiler_config, "mode", None))

            def backend(gm, example_inputs):
                fake.graphs += 1
                return gm.forward

            return backend

        self.get_npu_backend = get_npu_backend


def llama(config: dict[str, Any], dtype: torch.dtype = torch.float32, **overrides: Any) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = LlamaConfig(**{**config, **overrides})
    return AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa").eval().to(dtype)


def inputs() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 500, (BATCH, PROMPT), generator=gen)
    mask = torch.ones_like(ids)
    mask[1, :2] = 0  # left padding: the mask reaches the decode steps
    return {"input_ids": ids, "attention_mask": mask}


def generate(model: torch.nn.Module, kwargs: dict[str, Any]) -> torch.Tensor:
    with torch.inference_mode():
        out = model.generate(**inputs(), max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False, **kwargs)
    return out[:, PROMPT:]


def choice(kind: str, name: str = "test"):
    from ab_runtime.device import DeviceChoice

    return DeviceChoice(kind, kind, kind, name, False, None, None)  # requested = kind = device, no fallback


def main() -> None:
    from ab_runtime import accuracy_standard
    from ab_runtime.optimize import decode_passes, passes

    base = {**json.loads(open(sys.argv[2]).read()), "num_hidden_layers": 1}  # one layer: less to compile
    out: dict[str, Any] = {"not_measured": "NPU/CUDA decode passes: applicability and construction only"}
    out["listing"] = [r for r in passes.catalogue_table() if r["workload"] == "generation"]
    out["listing_names"] = [r["name"] for r in passes.catalogue_table()]
    cfg32 = decode_passes.DecodeConfig(batch=BATCH, prompt_tokens=PROMPT, new_tokens=NEW, dtype="float32")
    cfg16 = decode_passes.DecodeConfig(batch=BATCH, prompt_tokens=PROMPT, new_tokens=NEW, dtype="bfloat16")

    # The CPU pass, run for real against eager greedy generation.
    reference = generate(llama(base), {})
    model, kwargs = decode_passes.BY_NAME["cpu_static_cache_compile"].apply(llama(base), {})
    compiled = generate(model, kwargs)
    agree = decode_passes.token_agreement(reference, compiled)
    out["cpu_static"] = {
        "kwargs": kwargs,
        "agreement": agree,
        "tokens": compiled.tolist(),
        "forward_compiled": hasattr(model.forward, "_torchdynamo_orig_callable"),
        "verdict": accuracy_standard.generation_verdict(agree["match_rate"], agree["first_divergence"], "causal_lm"),
    }
    model = llama(base)
    out["applies_cpu"] = {r["name"]: r["reason"] for r in decode_passes.applicability(choice("cpu"), model, cfg32)}
    out["applies_cuda"] = {r["name"]: r["reason"] for r in decode_passes.applicability(choice("cuda"), model, cfg32)}
    out["applies_npu_bare"] = {
        r["name"]: r["reason"] for r in decode_passes.applicability(choice("npu", "Ascend910B3"), model, cfg16)
    }
    long = decode_passes.DecodeConfig(batch=1, prompt_tokens=250, new_tokens=10, dtype="float32")
    out["too_long"] = decode_passes.BY_NAME["cpu_static_cache_compile"].applicable(choice("cpu"), model, long)

    # NPU passes against the doubles.
    npu = FakeDecodeTorchNpu("scale")
    sys.modules["torch_npu"], sys.modules["torchair"] = npu, FakeTorchair(has_mode=True)
    a2, p310 = choice("npu", "Ascend910B3"), choice("npu", "Ascend310P3")
    out["applies_npu"] = {r["name"]: r["reason"] for r in decode_passes.applicability(a2, model, cfg16)}
    out["applies_npu_fp32"] = decode_passes.BY_NAME["npu_fused_infer_attention"].applicable(a2, model, cfg32)
    wide = llama(base, head_dim=1024)
    out["applies_npu_wide"] = decode_passes.BY_NAME["npu_fused_infer_attention"].applicable(a2, wide, cfg16)
    out["aclgraph_310p"] = decode_passes.BY_NAME["npu_static_cache_aclgraph"].applicable(p310, model, cfg16)
    sys.modules["torchair"] = FakeTorchair(has_mode=False)
    out["aclgraph_no_mode"] = decode_passes.BY_NAME["npu_static_cache_aclgraph"].applicable(a2, model, cfg16)

    air = FakeTorchair(has_mode=True)
    sys.modules["torchair"] = air
    model, kwargs = decode_passes.BY_NAME["npu_static_cache_aclgraph"].apply(llama(base), {})
    graphed = generate(model, kwargs)
    out["aclgraph"] = {
        "kwargs": kwargs,
        "modes": air.modes,
        "graphs": air.graphs,
        "agreement": decode_passes.token_agreement(reference, graphed),
    }

    reference16 = generate(llama(base, torch.bfloat16), {})
    fused = {}
    from ab_runtime.optimize import npu_swaps

    for keyword in ("scale", "scale_value", None):
        npu = FakeDecodeTorchNpu(keyword)
        sys.modules["torch_npu"] = npu
        row: dict[str, Any] = {
            "detected": npu_swaps.fused_infer_scale_keyword(),
            "applies": decode_passes.BY_NAME["npu_fused_infer_attention"].applicable(a2, model, cfg16),
        }
        if keyword is not None:
            swapped, kwargs = decode_passes.BY_NAME["npu_fused_infer_attention"].apply(llama(base, torch.bfloat16), {})
            tokens = generate(swapped, kwargs)
            row.update(
                calls=len(npu.log),
                agreement=decode_passes.token_agreement(reference16, tokens),
                attn=swapped.config._attn_implementation,
            )
        fused[str(keyword)] = row
    out["fused"] = fused

    # Both NPU groups together: the attention swap inside the captured static-cache decode graph.
    npu, air = FakeDecodeTorchNpu("scale", count=False), FakeTorchair(has_mode=True)
    sys.modules["torch_npu"], sys.modules["torchair"] = npu, air
    chosen = decode_passes.get(["npu_static_cache_torchair", "npu_fused_infer_attention"])
    model, kwargs = decode_passes.apply_all(chosen, llama(base, torch.bfloat16), {})
    tokens = generate(model, kwargs)
    out["combined"] = {
        "graphs": air.graphs,
        "modes": air.modes,
        "attn": model.config._attn_implementation,
        "agreement": decode_passes.token_agreement(reference16, tokens),
    }

    # Greedy comparison on a constructed case: row 1 perturbed from token k = 3 on.
    ref = torch.arange(12).reshape(2, 6)
    target = ref.clone()
    target[1, 3:] += 100
    out["divergence"] = decode_passes.token_agreement(ref, target)
    out["divergence_short"] = decode_passes.token_agreement(ref, ref[:, :4])
    out["verdicts"] = {
        str(rate): accuracy_standard.generation_verdict(rate, 3, "causal_lm")["verdict"] for rate in (1.0, 0.9, 0.75)
    }
    out["verdict_strict"] = accuracy_standard.generation_verdict(
        0.95, 10, "causal_lm", {"optimization": {"top1_agreement_min": 1.0}}
    )["verdict"]
    try:
        decode_passes.token_agreement(ref, ref[:1])
        out["bad_shape"] = None
    except ValueError as exc:
        out["bad_shape"] = str(exc)
    try:
        decode_passes.apply_all(
            decode_passes.get(["cpu_static_cache_compile", "cuda_static_cache_cudagraphs"]), llama(base), {}
        )
        out["clash"] = None
    except ValueError as exc:
        out["clash"] = str(exc)
    try:
        decode_passes.get(["no_such_pass"])
        out["unknown"] = None
    except ValueError as exc:
        out["unknown"] = str(exc)
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
