"""The optimization pass catalogue: small named units, where each applies and how it is applied.

A pass declares its device, kind (environment | precision | module_swap | layout | quantization |
compile), an exclusive group (two passes of one group never combine, e.g. two precisions),
`applies(traits)` (None when it applies, else the reason it does not) and `apply(build)`, which
edits a `Build` (ab_runtime.build): the model, the dtype inputs are cast to, an autocast dtype, per-call contexts
(global switches set for the optimized calls only, so baseline and candidate can interleave in
one process), torch.compile arguments and environment variables. `ab_runtime.build.finalize` turns a Build into
a callable. The decode passes of ab_runtime.optimize.decode_passes (static KV cache + compile, CUDA graphs,
torchair, aclgraph, fused incremental attention) enter this catalogue as kind `decode`: they apply
only to a generation workload (their reasons are computed once per search into `Traits.decode`),
act on the model's forward and set `Build.decoder`, so generation (workloads.decoder_for) runs
their decode loop, and they are rebuilt by name like every pass (confirmation, perf run, gates).
Forward passes of another device are never measured on a machine without that device: they are
filtered out by `device` before anything runs; decode passes of another device are listed with
the reason they do not apply.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import workloads
from ..build import DTYPE_NAMES, Build
from ..errors import RuntimeDiagnosis
from ..ops import acceptance
from . import decode_passes, npu_swaps

CPU_BF16_ENV = "ASCENDBRIDGE_CPU_BF16"  # native | none: override the CPU bf16 probe (tests, diagnosis)
CPU_BF16_CHOICES = ("native", "none")
KIND_ORDER = ("environment", "precision", "module_swap", "layout", "quantization", "compile", "decode")
GENERATION_WORKLOADS = ("generation", "encoder_generation")
# A decode pass's group in this catalogue: a decode graph compiles the forward (never with another
# compile pass), the fused decode attention sets the attention implementation (never with another).
DECODE_GROUPS = {"decode_graph": "compile", "decode_attention": "attention"}


@dataclass(frozen=True)
class Traits:
    """What a pass needs to know to decide whether it applies."""

    device: str  # cpu | cuda | npu
    task_family: str
    model_type: str
    baseline_dtype: str
    linear_layers: int
    conv_layers: int
    rms_norms: int
    swiglu_mlps: int
    rotary: bool
    attention_switchable: bool
    head_dim: int | None
    threads: int
    cores: int
    bf16_gemm_speedup: float | None  # measured bf16 / fp32 GEMM throughput on this CPU
    cpu_bf16_native: bool = False  # the CPU advertises bf16 instructions (avx512_bf16 / amx_bf16)
    workload: str = "forward"  # the workload whose headline is optimized (decode passes need generation)
    # decode pass name -> why it does not apply on this device / model / generation shape (None: it
    # applies); decode_passes.applicability, evaluated once per search (optimize.decode_reasons).
    decode: dict[str, str | None] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# The Pass fields a catalogue listing shows (Pass.describe); the callables are not data.
DESCRIBED_FIELDS = ("name", "device", "kind", "group", "summary", "changes_code", "needs_restart")


@dataclass(frozen=True)
class Pass:
    name: str
    device: str
    kind: str
    group: str | None
    summary: str
    applies: Callable[[Traits], str | None]
    apply: Callable[[Build], None]
    changes_code: bool = False
    needs_restart: bool = False  # an environment variable read at import: cannot toggle in-process

    def describe(self) -> dict[str, Any]:
        described = {name: getattr(self, name) for name in DESCRIBED_FIELDS}
        return {**described, "workload": "generation" if self.kind == "decode" else "forward"}


# ---------------------------------------------------------------- traits


def bf16_gemm_speedup(size: int = 384, reps: int = 10) -> float:
    """How much faster a bf16 GEMM runs than fp32 on this CPU (best of `reps`)."""

    def best(dtype: torch.dtype) -> float:
        a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
        torch.mm(a, b)
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            torch.mm(a, b)
            times.append(time.perf_counter() - start)
        return min(times)

    return best(torch.float32) / best(torch.bfloat16)


def cpu_bf16_override() -> str | None:
    """The forced CPU bf16 branch from ASCENDBRIDGE_CPU_BF16 (native | none), or None to probe.

    Lets the tests run both branches on any CPU and lets a user rule the CPU's features out when
    diagnosing a search; a bad value is a one-line RuntimeDiagnosis.
    """
    raw = os.environ.get(CPU_BF16_ENV, "").strip()
    if not raw:
        return None
    if raw not in CPU_BF16_CHOICES:
        raise RuntimeDiagnosis(f"{CPU_BF16_ENV} must be one of {', '.join(CPU_BF16_CHOICES)} (or unset), got '{raw}'")
    return raw


def cpu_bf16_native() -> bool:
    """True when forced `native`, or (unforced) when /proc/cpuinfo lists avx512_bf16 or amx_bf16."""
    forced = cpu_bf16_override()
    if forced is not None:
        return forced == "native"
    try:
        flags = open("/proc/cpuinfo").read().split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def cpu_bf16_gemm_speedup() -> float | None:
    """The GEMM micro-benchmark, skipped (None) when the branch is forced: a forced `none` must not
    be overturned by a lucky measurement."""
    return None if cpu_bf16_override() is not None else bf16_gemm_speedup()


def model_traits(
    model: torch.nn.Module,
    device: str,
    task_family: str,
    baseline_dtype: str,
    bf16_speedup: float | None = None,
    bf16_native: bool | None = None,
    workload: str = "forward",
    decode: dict[str, str | None] | None = None,
) -> Traits:
    config = getattr(model, "config", None)
    heads = getattr(config, "num_attention_heads", None)
    hidden = getattr(config, "hidden_size", None)
    head_dim = getattr(config, "head_dim", None) or (
        hidden // heads if isinstance(hidden, int) and isinstance(heads, int) and heads else None
    )
    return Traits(
        device=device,
        task_family=task_family,
        model_type=str(getattr(config, "model_type", "")),
        baseline_dtype=baseline_dtype,
        linear_layers=sum(isinstance(m, torch.nn.Linear) for m in model.modules()),
        conv_layers=sum(isinstance(m, (torch.nn.Conv1d, torch.nn.Conv2d)) for m in model.modules()),
        rms_norms=len(npu_swaps.rms_norm_modules(model)),
        swiglu_mlps=len(npu_swaps.swiglu_modules(model)),
        rotary=npu_swaps.rotary_module(model) is not None,
        attention_switchable=config is not None and hasattr(config, "_attn_implementation"),
        head_dim=head_dim if isinstance(head_dim, int) else None,
        threads=torch.get_num_threads(),
        cores=usable_cores(),
        bf16_gemm_speedup=bf16_speedup,
        cpu_bf16_native=cpu_bf16_native() if bf16_native is None and device == "cpu" else bool(bf16_native),
        workload=workload,
        decode=dict(decode or {}),
    )


# ---------------------------------------------------------------- helpers for apply


def _cast(dtype: torch.dtype) -> Callable[[Build], None]:
    def apply(build: Build) -> None:
        build.model = build.model.to(dtype)
        build.input_dtype = dtype
        build.accuracy_dtype = DTYPE_NAMES[dtype]

    return apply


def _autocast(dtype: torch.dtype) -> Callable[[Build], None]:
    def apply(build: Build) -> None:
        build.autocast = dtype
        build.accuracy_dtype = DTYPE_NAMES[dtype]

    return apply


def _compile(**kwargs: Any) -> Callable[[Build], None]:
    def apply(build: Build) -> None:
        build.compile_kwargs = dict(kwargs)

    return apply


def usable_cores() -> int:
    """Cores this process may run on: its affinity mask (a team lead pins timed runs to their own
    cores), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@contextlib.contextmanager
def _threads(n: int) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _set_threads(n: int | None) -> Callable[[Build], None]:
    """n threads (None: one per core) around each optimized call."""

    def apply(build: Build) -> None:
        count = n or usable_cores()
        build.contexts.append(lambda: _threads(count))
        build.notes.append(f"torch.set_num_threads({count}) around each call")

    return apply


@contextlib.contextmanager
def _tf32() -> Iterator[None]:
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def _apply_tf32(build: Build) -> None:
    build.contexts.append(_tf32)
    build.accuracy_dtype = "float32"


def _apply_channels_last(build: Build) -> None:
    build.model = build.model.to(memory_format=torch.channels_last)
    build.channels_last = True


def _apply_int8(build: Build) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization's deprecation notice
        from torch.ao.quantization import quantize_dynamic

        build.model = quantize_dynamic(build.model, {torch.nn.Linear}, dtype=torch.qint8)
    # The label files use; the verdict is the optimization budget's against the float32 reference
    # (comparator.judge_optimized), as for every pass.
    build.accuracy_dtype = "bfloat16"


def _apply_sdpa(build: Build) -> None:
    setter = getattr(build.model, "set_attn_implementation", None)
    if callable(setter):
        setter("sdpa")
    else:
        build.model.config._attn_implementation = "sdpa"


@contextlib.contextmanager
def _npu_jit_off() -> Iterator[None]:
    """jit_compile=False for the optimized calls only; the mode before is restored afterwards.

    torch_npu documents `torch_npu.npu.is_jit_compile_false()` (True when JIT compilation is off)
    next to `set_compile_mode(jit_compile=...)`; restoring a hard-coded True would run the
    interleaved baseline in another mode than the process default and flatter the pass.
    """
    import torch_npu

    was_off = bool(torch_npu.npu.is_jit_compile_false())
    torch_npu.npu.set_compile_mode(jit_compile=False)
    try:
        yield
    finally:
        torch_npu.npu.set_compile_mode(jit_compile=not was_off)


def _apply_npu_jit_off(build: Build) -> None:
    build.contexts.append(_npu_jit_off)


def _apply_task_queue(build: Build) -> None:
    build.env["TASK_QUEUE_ENABLE"] = "2"


def _verdict_row(verdict: dict[str, Any]) -> dict[str, Any]:
    """What a pass row keeps of a contract verdict (the samples stay out of the notes)."""
    return {
        k: verdict[k]
        for k in (
            "pass",
            "judged",
            "dtype",
            "device",
            "replacement",
            "accepted",
            "reasons",
            "samples",
            "failed",
            "max_abs",
            "mere",
            "mare",
            "rmse",
            "min_within_share",
            "seconds",
            "cached",
        )
    }


def contracted_swap(
    pass_name: str,
    find: Callable[[torch.nn.Module], list[torch.nn.Module]],
    fn: Callable[[torch.nn.Module], int],
    width: Callable[[torch.nn.Module], int],
    label: str,
) -> Callable[[Build], None]:
    """A module swap held to the operator acceptance contract before it takes effect: each module
    class (in the dtype it computes in) is judged once per process (acceptance.swap_verdict); only
    the modules of accepted classes are swapped, and a pass with none accepted is not applied."""

    def apply(build: Build) -> None:
        verdicts: dict[type, dict[str, Any]] = {}
        for module in find(build.model):
            if type(module) not in verdicts:
                verdicts[type(module)] = acceptance.swap_verdict(pass_name, module, fn, width(module))
                build.acceptance.append(_verdict_row(verdicts[type(module)]))
        refused = [
            f"{cls.__name__} refused by the operator acceptance contract: {'; '.join(v['reasons'])}"
            for cls, v in verdicts.items()
            if not v["accepted"]
        ]
        accepted = [m for m in find(build.model) if verdicts[type(m)]["accepted"]]
        if refused and not accepted:  # nothing accepted: the pass is not applied (the search's row says why)
            raise acceptance.ReplacementRefused(f"{pass_name}: {'; '.join(refused)}")
        swapped = sum(fn(m) for m in accepted)
        build.notes.append(f"{label}: {swapped}" + (f" ({'; '.join(refused)})" if refused else ""))

    return apply


def _apply_rotary(build: Build) -> None:
    """The patch is installed inert; it takes effect (rotary_active around each call) only when the
    contract accepts it for this modeling module and dtype."""
    modeling = npu_swaps.rotary_module(build.model)
    if modeling is None or not npu_swaps.install_rotary(build.model):
        return
    dtype, device = acceptance.dtype_of(build.model)
    heads = getattr(getattr(build.model, "config", None), "num_attention_heads", None)
    verdict = acceptance.rotary_verdict(
        modeling, modeling.apply_rotary_pos_emb._ab_original, dtype, device, heads if isinstance(heads, int) else 2
    )
    build.acceptance.append(_verdict_row(verdict))
    if not verdict["accepted"]:
        raise acceptance.ReplacementRefused(
            "npu_rotary_mul: apply_rotary_pos_emb refused by the operator acceptance "
            f"contract: {'; '.join(verdict['reasons'])}"
        )
    build.contexts.append(npu_swaps.rotary_active)


def _apply_fusion_attention(build: Build) -> None:
    """The attention implementation switched to npu_fusion_attention, judged by the contract first
    (acceptance.attention_swap puts the model's own back and raises when refused)."""
    verdict = acceptance.attention_swap("npu_fusion_attention", build.model, npu_swaps.swap_attention)
    if verdict is not None:
        build.acceptance.append(_verdict_row(verdict))
    build.notes.append(f"attention implementation set: {verdict is not None}")


def _apply_torchair(build: Build) -> None:
    import torchair  # documented: torchair.get_npu_backend(compiler_config=CompilerConfig())

    build.compile_kwargs = {
        "backend": torchair.get_npu_backend(compiler_config=torchair.CompilerConfig()),
        "dynamic": False,
    }


# ---------------------------------------------------------------- applicability helpers


def _fp32_baseline(t: Traits) -> str | None:
    return None if t.baseline_dtype == "float32" else f"baseline already runs in {t.baseline_dtype}"


def _cpu_bf16(t: Traits) -> str | None:
    if _fp32_baseline(t):
        return _fp32_baseline(t)
    # Native bf16 instructions, or a measured GEMM gain (a micro-benchmark alone misleads on a busy
    # machine): the paired measurement of the whole model then decides whether it is faster.
    if t.cpu_bf16_native:
        return None
    if t.bf16_gemm_speedup is None:
        return "this CPU has no native bf16 (bf16 GEMM speed not measured)"
    if t.bf16_gemm_speedup < 1.2:
        return (
            f"this CPU has no native bf16 and runs bf16 GEMM no faster than fp32 (measured x{t.bf16_gemm_speedup:.2f})"
        )
    return None


def _needs(attr: str, what: str) -> Callable[[Traits], str | None]:
    return lambda t: None if getattr(t, attr) else f"model has no {what}"


def _more_threads(t: Traits) -> str | None:
    return None if t.threads < t.cores else f"torch already uses {t.threads} threads for {t.cores} cores"


def _one_thread(t: Traits) -> str | None:
    return None if t.threads > 1 else "torch already runs single-threaded"


def _low_precision_attention(t: Traits) -> str | None:
    if not t.attention_switchable:
        return "model has no switchable attention implementation"
    if t.baseline_dtype not in ("float16", "bfloat16"):
        return "npu_fusion_attention takes fp16/bf16 only; baseline is " + t.baseline_dtype
    if t.head_dim is None or t.head_dim > npu_swaps.FUSION_MAX_HEAD_DIM:  # documented head-dim range
        return f"head dim {t.head_dim} outside npu_fusion_attention's documented range"
    return None


def _rotary_applies(t: Traits) -> str | None:
    if not t.rotary:
        return "model has no HF apply_rotary_pos_emb"
    if t.head_dim != npu_swaps.ROTARY_LIMITS["head_dim"]:
        return (
            f"npu_rotary_mul: the limits common to its 6.0.0 (D == 128) and 7.0.0 (D < 896, even) documentation "
            f"allow head dim {npu_swaps.ROTARY_LIMITS['head_dim']} only, got {t.head_dim}"
        )
    return None


def _always(_: Traits) -> str | None:
    return None


def _decode_applies(name: str) -> Callable[[Traits], str | None]:
    def applies(t: Traits) -> str | None:
        if t.workload not in GENERATION_WORKLOADS:
            return f"acts on generate's decode loop; the optimized workload is {t.workload}"
        if name not in t.decode:
            return "decode applicability was not evaluated for this search"
        return t.decode[name]

    return applies


def _apply_decode(dp: Any) -> Callable[[Build], None]:
    """The decode pass edits the model (swapped attention) and compiles its forward; the compiled
    forward is taken back off the module and used by its decoder only (a static KV cache where the
    pass names one), so generation runs the pass while the accuracy forward stays as it was: a
    decode pass is judged by the greedy tokens of its generation (optimize.judge)."""

    def apply(build: Build) -> None:
        model, kwargs = dp.apply(build.model, {})
        compiled = model.__dict__.pop("forward", None)  # set by the passes that compile model.forward
        build.model = model
        static = kwargs.get("cache_implementation") == "static"
        build.decoder = functools.partial(_pass_decoder, forward=compiled, static=static)
        build.notes.append(f"{dp.name}: {dp.summary}")

    return apply


def _pass_decoder(
    b: Build,
    model: torch.nn.Module,
    encoder_decoder: bool,
    new_tokens: int,
    forward: Callable[..., Any] | None,
    static: bool,
) -> Any:
    if static:
        return workloads.StaticCacheDecoder(b, model, encoder_decoder, new_tokens=new_tokens, forward=forward)
    return workloads.HFDecoder(b, model, encoder_decoder, forward=forward)


def _cast_pass(name: str, device: str, dtype: torch.dtype, applies: Callable[[Traits], str | None]) -> Pass:
    """The pass that casts weights and float inputs to `dtype`: the same on every device that has it."""
    summary = f"weights and float inputs cast to {str(dtype).removeprefix('torch.')}"
    return Pass(name, device, "precision", "precision", summary, applies, _cast(dtype))


def _decode_catalogue() -> tuple[Pass, ...]:
    return tuple(
        Pass(
            dp.name,
            dp.device,
            "decode",
            DECODE_GROUPS[dp.group],
            dp.summary,
            _decode_applies(dp.name),
            _apply_decode(dp),
            changes_code=dp.changes_code,
        )
        for dp in decode_passes.CATALOGUE
    )


CATALOGUE: tuple[Pass, ...] = (
    # CPU
    Pass(
        "cpu_threads_all",
        "cpu",
        "environment",
        "threads",
        "torch intra-op threads = CPU cores",
        _more_threads,
        _set_threads(None),
    ),
    Pass(
        "cpu_threads_1",
        "cpu",
        "environment",
        "threads",
        "one intra-op thread (no OpenMP barrier stalls when the CPU is shared or oversubscribed)",
        _one_thread,
        _set_threads(1),
    ),
    Pass(
        "cpu_bf16_autocast",
        "cpu",
        "precision",
        "precision",
        "torch.autocast('cpu', bfloat16)",
        _cpu_bf16,
        _autocast(torch.bfloat16),
    ),
    _cast_pass("cpu_bf16_cast", "cpu", torch.bfloat16, _cpu_bf16),
    Pass(
        "cpu_int8_dynamic",
        "cpu",
        "quantization",
        "precision",
        "dynamic int8 quantisation of nn.Linear (torch.ao quantize_dynamic)",
        lambda t: _fp32_baseline(t) or _needs("linear_layers", "nn.Linear layers")(t),
        _apply_int8,
    ),
    Pass(
        "cpu_channels_last",
        "cpu",
        "layout",
        "layout",
        "channels_last memory format for conv models",
        _needs("conv_layers", "convolution layers"),
        _apply_channels_last,
    ),
    Pass("cpu_compile", "cpu", "compile", "compile", "torch.compile (inductor)", _always, _compile(backend="inductor")),
    # CUDA
    _cast_pass("cuda_fp16", "cuda", torch.float16, _fp32_baseline),
    _cast_pass("cuda_bf16", "cuda", torch.bfloat16, _fp32_baseline),
    Pass("cuda_tf32", "cuda", "environment", "tf32", "TF32 matmul and cuDNN convolutions", _fp32_baseline, _apply_tf32),
    Pass(
        "cuda_sdpa",
        "cuda",
        "module_swap",
        "attention",
        "scaled_dot_product_attention (flash / mem-efficient)",
        lambda t: None if t.attention_switchable else "model has no switchable attention implementation",
        _apply_sdpa,
    ),
    Pass(
        "cuda_compile_cudagraphs",
        "cuda",
        "compile",
        "compile",
        "torch.compile mode='reduce-overhead' (CUDA graphs)",
        _always,
        _compile(backend="inductor", mode="reduce-overhead"),
    ),
    # Ascend
    Pass(
        "npu_task_queue",
        "npu",
        "environment",
        "task_queue",
        "TASK_QUEUE_ENABLE=2 (two-level dispatch pipeline)",
        _always,
        _apply_task_queue,
        needs_restart=True,
    ),
    Pass(
        "npu_jit_compile_off",
        "npu",
        "environment",
        "jit",
        "torch.npu.set_compile_mode(jit_compile=False)",
        _always,
        _apply_npu_jit_off,
    ),
    _cast_pass("npu_fp16", "npu", torch.float16, _fp32_baseline),
    _cast_pass("npu_bf16", "npu", torch.bfloat16, _fp32_baseline),
    Pass(
        "npu_rms_norm",
        "npu",
        "module_swap",
        "rms_norm",
        "RMSNorm -> torch_npu.npu_rms_norm",
        _needs("rms_norms", "plain RMSNorm modules"),
        contracted_swap(
            "npu_rms_norm",
            npu_swaps.rms_norm_modules,
            npu_swaps.swap_rms_norm,
            lambda m: int(m.weight.shape[0]),
            "RMSNorm modules swapped",
        ),
        changes_code=True,
    ),
    Pass(
        "npu_swiglu",
        "npu",
        "module_swap",
        "swiglu",
        "SwiGLU MLP -> torch_npu.npu_swiglu",
        _needs("swiglu_mlps", "gate/up/down SiLU MLPs"),
        contracted_swap(
            "npu_swiglu",
            npu_swaps.swiglu_modules,
            npu_swaps.swap_swiglu,
            lambda m: int(m.gate_proj.in_features),
            "SwiGLU MLPs swapped",
        ),
        changes_code=True,
    ),
    Pass(
        "npu_rotary_mul",
        "npu",
        "module_swap",
        "rotary",
        "apply_rotary_pos_emb -> torch_npu.npu_rotary_mul",
        _rotary_applies,
        _apply_rotary,
        changes_code=True,
    ),
    Pass(
        "npu_fusion_attention",
        "npu",
        "module_swap",
        "attention",
        "attention -> torch_npu.npu_fusion_attention",
        _low_precision_attention,
        _apply_fusion_attention,
        changes_code=True,
    ),
    Pass(
        "npu_torchair_compile",
        "npu",
        "compile",
        "compile",
        "torch.compile with torchair.get_npu_backend()",
        _always,
        _apply_torchair,
    ),
) + _decode_catalogue()
# How each pass that replaces computation is held to account (docs/operators.md, "Every replacement"):
# `contract` passes run the operator acceptance contract before the swap takes effect; the others
# replace computation with PyTorch's, torch_npu's or a compiler's own kernels, or are lossy by design
# (int8), and are judged on the model's outputs by the optimization accuracy budget (and, for
# decode passes, the greedy tokens), as every pass also is.
CONTRACT = "contract"
BUDGET = "budget"
REPLACEMENT_STANDARD: dict[str, str] = {
    "npu_rms_norm": CONTRACT,
    "npu_swiglu": CONTRACT,
    "npu_rotary_mul": CONTRACT,
    "npu_fusion_attention": CONTRACT,
    "cpu_int8_dynamic": BUDGET,  # int8 weights are lossy by design: no float operator threshold applies
    "cuda_sdpa": BUDGET,
    "cpu_compile": BUDGET,
    "cuda_compile_cudagraphs": BUDGET,
    "npu_torchair_compile": BUDGET,
    **{dp.name: BUDGET for dp in decode_passes.CATALOGUE},
    "npu_fused_infer_attention": CONTRACT,
}
EXTRA_PASSES_ENV = "AB_RUNTIME_EXTRA_PASSES"


def _extra_passes() -> tuple[Pass, ...]:
    """Passes from the file named by AB_RUNTIME_EXTRA_PASSES (`extra_passes(Pass)` there), else none.

    This is how tests add passes of known cost (a fixed sleep, cached outputs) so that the search,
    the confirmation and the gates are exercised against controlled effects, never machine luck.
    Unset in production; the gates recognise such passes by name only when the same variable is
    set in their own environment.
    """
    path = os.environ.get(EXTRA_PASSES_ENV)
    if not path:
        return ()
    import importlib.util

    spec = importlib.util.spec_from_file_location("ab_runtime_extra_passes", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{EXTRA_PASSES_ENV}={path}: cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    extra = tuple(module.extra_passes(Pass))
    clash = [p.name for p in extra if p.name in {c.name for c in CATALOGUE}]
    if clash:
        raise ValueError(f"{EXTRA_PASSES_ENV}: pass name(s) {', '.join(clash)} already in the catalogue")
    return extra


CATALOGUE = CATALOGUE + _extra_passes()
BY_NAME = {p.name: p for p in CATALOGUE}


def for_device(device: str) -> list[Pass]:
    return [p for p in CATALOGUE if p.device == device]


def search_candidates(device: str) -> list[Pass]:
    """The default search: every pass of the device, then the other devices' decode passes, which
    are only listed (their rows say why they do not apply here)."""
    return for_device(device) + [p for p in CATALOGUE if p.kind == "decode" and p.device != device]


def get(names: list[str]) -> list[Pass]:
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise ValueError(f"unknown pass(es): {', '.join(unknown)} (known: {', '.join(BY_NAME)})")
    return [BY_NAME[n] for n in names]


def split_settings(names: list[str]) -> dict[str, list[str]]:
    """Chosen passes split into process settings (threads, task queue, JIT mode, TF32) and model
    changes: a thread count that "wins" on a loaded machine describes the machine, not the model."""
    chosen = get(names)
    return {
        "environment_settings": [p.name for p in chosen if p.kind == "environment"],
        "model_changes": [p.name for p in chosen if p.kind != "environment"],
    }


def conflicts(chosen: list[Pass], candidate: Pass) -> str | None:
    for p in chosen:
        if candidate.group is not None and p.group == candidate.group:
            return f"same group '{p.group}' as {p.name}"
    return None


def ordered(chosen: list[Pass]) -> list[Pass]:
    """Application order: environment, precision, module swaps, layout, quantization, compile last."""
    return sorted(chosen, key=lambda p: KIND_ORDER.index(p.kind))


def build(model: torch.nn.Module, chosen: list[Pass], device_kind: str, baseline_dtype: torch.dtype) -> Build:
    b = Build(
        model=model, device_kind=device_kind, input_dtype=baseline_dtype, accuracy_dtype=DTYPE_NAMES[baseline_dtype]
    )
    for p in ordered(chosen):
        p.apply(b)
    return b


def catalogue_table() -> list[dict[str, Any]]:
    """Forward-pass passes (`workload: forward`) and the decode passes (`workload: generation`,
    with the documented API each follows), each listed once."""
    decode = {r["name"]: r for r in decode_passes.catalogue_table()}
    return [{**decode[p.name], "group": p.group} if p.name in decode else p.describe() for p in CATALOGUE]


if __name__ == "__main__":  # `python -m ab_runtime.optimize.passes`: print both catalogues
    import json

    json.dump(catalogue_table(), sys.stdout, indent=2)
    print()
