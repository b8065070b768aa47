"""Record the ATen operators a model dispatches for its workload, on CPU, as the NPU would see them.

    python -m ab_runtime.ops.record [--spec adaptation.json] [--out op_profile.json] [--new-tokens 3] [--backward]

One recorded pass in the spec's target dtype (the float32 islands kept): the forward of one
seeded sample, then, for the generating families, a greedy generation of a few tokens (prefill and
decode steps), and, when the model is trained (`--backward`), one training step: its forward in
train mode and its backward, whose ops are attributed to the modules whose forward created them.
The benchmark run records its own target this way after its timed measurement (`record_target`,
`accuracy_run.py --op-profile`); the command line builds the model on CPU itself and runs the
workload once unrecorded first (`record`'s warm-up). A TorchDispatchMode sees every op below
autograd and below the composite ops ATen itself
decomposes; per op it keeps the calls, the module path that issued it (the innermost module whose
forward was running), the dtypes and input shapes seen, its CPU time (exclusive: the mode is off
inside an op) and share, and whether ATen has a composite kernel for it (one that runs on any
backend through other ops). CPU-only kernels are named back as the op they implement
(`CPU_KERNELS`): the NPU never sees `_scaled_dot_product_flash_attention_for_cpu`, it sees
`scaled_dot_product_attention`, which torch_npu registers whole. The profile is what the framework's
gap report reads (ascendbridge/operators/gaps.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from ..outputs import tensors_in

PROFILE_FORMAT = "ascendbridge.op_profile/1"
# CPU kernel -> the op the NPU backend sees instead (None: a CPU-side choice the NPU never makes).
CPU_KERNELS: dict[str, str | None] = {
    "_scaled_dot_product_flash_attention_for_cpu": "scaled_dot_product_attention",
    # a CUDA host's attention kernels (a benchmark run records its target where it runs)
    "_scaled_dot_product_flash_attention": "scaled_dot_product_attention",
    "_scaled_dot_product_efficient_attention": "scaled_dot_product_attention",
    "_scaled_dot_product_cudnn_attention": "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention_for_cpu_backward": "scaled_dot_product_attention",
    "_fused_sdp_choice": None,
    "_weight_int4pack_mm_for_cpu": "_weight_int4pack_mm",
}
COMPOSITE_KEYS = ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")
MAX_SHAPES = 6  # distinct input-shape signatures kept per op
MAX_MODULES = 5  # issuing module paths kept per op (most calls first)
LABELLED_FAMILIES = ("causal_lm", "masked_lm")  # the training step's loss is the model's own, inputs as labels


def op_name(func: Any) -> str:
    """`name` or `name.overload` (namespace `aten` left out, any other kept: `prims::convert`)."""
    namespace, _, name = func._schema.name.partition("::")
    overload = func._overloadname
    full = name if overload == "default" else f"{name}.{overload}"
    return full if namespace == "aten" else f"{namespace}::{full}"


def composite_kernels(func: Any) -> list[str]:
    """The composite dispatch keys ATen has a kernel for this op under (run on any backend)."""
    qualified = func._schema.name + ("" if func._overloadname == "default" else f".{func._overloadname}")
    return [k for k in COMPOSITE_KEYS if torch._C._dispatch_has_kernel_for_dispatch_key(qualified, k)]


def schema_of(name: str) -> str:
    """The ATen schema of `name` (`op` or `op.overload`), "" when torch has no such op."""
    base, _, overload = name.partition(".")
    try:
        return str(getattr(getattr(torch.ops.aten, base), overload or "default")._schema)
    except (AttributeError, RuntimeError):
        return ""


@dataclasses.dataclass
class OpStats:
    calls: int = 0
    cpu_ms: float = 0.0
    dtypes: set[str] = dataclasses.field(default_factory=set)
    shapes: list[str] = dataclasses.field(default_factory=list)
    modules: dict[str, int] = dataclasses.field(default_factory=dict)
    phases: set[str] = dataclasses.field(default_factory=set)
    composite: list[str] = dataclasses.field(default_factory=list)
    schema: str = ""
    cpu_kernels: set[str] = dataclasses.field(default_factory=set)
    non_contiguous: bool = False


class OpRecorder(TorchDispatchMode):
    """Counts and times every dispatched op; `module_path` and `phase` are set by `record`."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: dict[str, OpStats] = {}
        self.stack: list[str] = []
        self.phase = "forward"

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        start = time.perf_counter()
        out = func(*args, **kwargs)
        elapsed = (time.perf_counter() - start) * 1000.0
        raw = op_name(func)
        name = CPU_KERNELS.get(raw, raw) if raw in CPU_KERNELS else raw
        if name is None:
            return out
        stats = self.ops.get(name)
        if stats is None:
            stats = self.ops[name] = OpStats(
                composite=composite_kernels(func) if name == raw else [],
                schema=str(func._schema) if name == raw else schema_of(name),
            )
        stats.calls += 1
        stats.cpu_ms += elapsed
        stats.phases.add(self.phase)
        if name != raw:
            stats.cpu_kernels.add(raw)
        where = self.stack[-1] if self.stack else "(model)"
        stats.modules[where] = stats.modules.get(where, 0) + 1
        inputs = list(tensors_in((args, kwargs)))
        stats.dtypes.update(str(t.dtype).removeprefix("torch.") for t in inputs)
        stats.non_contiguous |= any(not t.is_contiguous() for t in inputs)
        shape = " x ".join(str(list(t.shape)) for t in inputs)
        if len(stats.shapes) < MAX_SHAPES and shape not in stats.shapes:
            stats.shapes.append(shape)
        return out


@contextmanager
def module_paths(model: torch.nn.Module, recorder: OpRecorder) -> Iterator[None]:
    """Keep `recorder.stack` on the module path whose forward is running (hooks removed after)."""
    handles = []
    for name, module in model.named_modules():
        path = name or "(model)"

        def push(_m: Any, _args: Any, _path: str = path) -> None:
            recorder.stack.append(_path)

        def pop(_m: Any, _args: Any, _out: Any) -> None:
            if recorder.stack:
                recorder.stack.pop()

        handles.append(module.register_forward_pre_hook(push))
        handles.append(module.register_forward_hook(pop, always_call=True))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


class GradFnPaths(TorchFunctionMode):
    """Tags the autograd nodes each torch function creates with the module path issuing it (the
    output's node and the untagged nodes behind it: those a function such as attention creates
    inside itself); a node's pre-hook puts its path on `recorder.stack` while its backward runs,
    so the backward's ops are attributed to the module whose forward created them."""

    def __init__(self, recorder: OpRecorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        stack = self.recorder.stack
        path = stack[-1] if stack else "(model)"

        def enter(_grads: Any) -> None:
            stack.append(path)

        def leave(_grad_in: Any, _grad_out: Any) -> None:
            if stack:
                stack.pop()

        todo = [t.grad_fn for t in tensors_in(out)]
        while todo:
            node = todo.pop()
            # a leaf's gradient accumulator outlives the step: left untagged
            if node is None or "ab_path" in node.metadata or node.name().endswith("AccumulateGrad"):
                continue
            node.metadata["ab_path"] = path
            node.register_prehook(enter)
            node.register_hook(leave)
            todo.extend(n for n, _ in node.next_functions)
        return out


@contextmanager
def trainable(model: torch.nn.Module) -> Iterator[None]:
    """The model in train mode with gradients on every floating parameter for one step; its mode,
    requires_grad flags and (absent) gradients are put back afterwards."""
    was_training = model.training
    params = [p for p in model.parameters() if p.is_floating_point()]
    flags = [p.requires_grad for p in params]
    model.train()
    for p in params:
        p.requires_grad_(True)
    try:
        with torch.enable_grad():
            yield
    finally:
        for p, flag in zip(params, flags):
            p.grad = None
            p.requires_grad_(flag)
        model.train(was_training)


def record(
    model: torch.nn.Module,
    phases: list[tuple[str, Callable[[], Any]]],
    train_step: Callable[[], torch.Tensor] | None = None,
    warm_up: bool = False,
) -> OpRecorder:
    """Run each (phase, call) once under the recorder, with module paths; then, for a training
    workload, `train_step()` (the loss of one batch, model in train mode: phase `training`) and
    its backward (phase `backward`, ops attributed to the modules that created their nodes).
    `warm_up` runs it all once unrecorded first, for a model that has not run yet: a cold first
    call's one-off costs (allocations, kernel selection) would otherwise land on whichever op came
    first and skew the CPU shares the gap report's remedy classes read."""
    if warm_up:
        with torch.no_grad():
            for _, call in phases:
                call()
        if train_step is not None:
            with trainable(model):
                train_step().backward()
    recorder = OpRecorder()
    with torch.no_grad(), module_paths(model, recorder), recorder:  # not inference_mode: composites decompose
        for phase, call in phases:
            recorder.phase = phase
            call()
    if train_step is not None:
        with trainable(model), module_paths(model, recorder), recorder:
            recorder.phase = "training"
            with GradFnPaths(recorder):
                loss = train_step()
            recorder.phase = "backward"
            loss.backward()
    return recorder


def profile(recorder: OpRecorder, about: dict[str, Any]) -> dict[str, Any]:
    """The recorded ops as JSON: most CPU time first, each with its share of the total."""
    total = sum(s.cpu_ms for s in recorder.ops.values()) or 1.0
    ops = {}
    for name, s in sorted(recorder.ops.items(), key=lambda kv: (-kv[1].cpu_ms, kv[0])):
        top = sorted(s.modules.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_MODULES]
        ops[name] = {
            "calls": s.calls,
            "cpu_ms": round(s.cpu_ms, 4),
            "cpu_share": round(s.cpu_ms / total, 6),
            "dtypes": sorted(s.dtypes),
            "shapes": s.shapes,
            "modules": dict(top),
            "phases": sorted(s.phases),
            "composite": s.composite,
            "schema": s.schema,
            "cpu_kernels": sorted(s.cpu_kernels),
            "non_contiguous": s.non_contiguous,
        }
    return {"format": PROFILE_FORMAT, **about, "total_cpu_ms": round(total, 4), "ops": ops}


def training_loss(
    task_family: str, run: Callable[[dict[str, Any]], Any], inputs: dict[str, Any]
) -> Callable[[], torch.Tensor]:
    """One batch's loss for the recorded training step: the model's own loss with the inputs as
    labels for the language-model families (causal and masked LM: cross-entropy and its backward),
    else the mean of the first floating output (a stand-in: a trainer's loss adds its own ops)."""

    def step() -> torch.Tensor:
        if task_family in LABELLED_FAMILIES and "input_ids" in inputs:
            out = run({**inputs, "labels": inputs["input_ids"]})
            if isinstance(out, dict) and isinstance(out.get("loss"), torch.Tensor):
                return out["loss"]
        else:
            out = run(inputs)
        first = next((t for t in tensors_in(out) if t.is_floating_point() and t.requires_grad), None)
        if first is None:
            raise ValueError("the model's training forward returned no floating output with a gradient")
        return first.float().mean()

    return step


def record_build(
    spec: Any,
    build: Any,
    inputs: dict[str, Any],
    workload_name: str,
    new_tokens: int,
    device: str = "cpu",
    backward: bool = False,
    warm_up: bool = False,
) -> dict[str, Any]:
    """The op profile of a built model (`ab_runtime.build.Build`, in the dtype it computes in):
    one forward of `inputs`, for a generating workload `new_tokens` greedy tokens, and when the
    model is trained (`backward`) one training step's forward and backward (training_loss);
    `warm_up` for a model that has not run yet (see `record`)."""
    from .. import build as ab_build
    from .. import workloads
    from ..inputs import forward_flags

    model = build.model
    run = ab_build.finalize(build, forward_flags(model))
    phases: list[tuple[str, Callable[[], Any]]] = [("forward", lambda: run(inputs))]
    generating = workload_name in ("generation", "encoder_generation") and new_tokens > 0
    if generating:
        enc_dec = spec.task_family in workloads.ENCODER_DECODER_FAMILIES
        decoder = workloads.HFDecoder(build, model, enc_dec)
        phases.append(("generation", lambda: workloads.generate(decoder, inputs, new_tokens, lambda: None, enc_dec)))
    train_step = training_loss(spec.task_family, run, inputs) if backward else None
    recorder = record(model, phases, train_step, warm_up)
    names = [p for p, _ in phases] + (["training", "backward"] if backward else [])
    return profile(
        recorder,
        {
            "model_id": spec.model_id,
            "task_family": spec.task_family,
            "dtype": build.accuracy_dtype,
            "device": device,
            "workload": workload_name,
            "phases": names,
            "new_tokens": new_tokens if generating else 0,
            "torch": torch.__version__,
        },
    )


def record_target(session: Any, target: Any, new_tokens: int = 3, backward: bool = False) -> dict[str, Any]:
    """The profile of a benchmark run's target (harness.Session and its Build), on sample 0: the
    run's own model, so recording costs one untimed pass and no second load or copy."""
    from .. import build as ab_build

    inputs = ab_build.prepare_inputs(session.samples[0], session.choice.torch_device, target)
    return record_build(session.spec, target, inputs, session.workload.name, new_tokens, session.choice.kind, backward)


def record_workload(spec_path: Path, new_tokens: int, backward: bool = False) -> dict[str, Any]:
    """The model's op profile for its workload, on CPU in the spec's target dtype (module docstring)."""
    from .. import build as ab_build
    from .. import device as ab_device
    from .. import families, workloads
    from ..harness import DTYPES, load_reference, place_target
    from ..spec import load_spec

    spec = load_spec(spec_path)
    cpu = ab_device.select_device("cpu")
    loaded = load_reference(spec, cpu, use_pretrained=False)
    dtype = DTYPES.get(spec.dtype_target, torch.float32)
    model, _ = place_target(loaded.model, spec, cpu, None, dtype)
    model.eval()
    family = families.get_family(spec.task_family)
    build = ab_build.Build(model, "cpu", dtype, spec.dtype_target)
    inputs = ab_build.prepare_inputs(
        family.build_inputs(model, loaded.config, spec.recipe, spec.recipe.seed), "cpu", build
    )
    workload = workloads.resolve(spec.task_family, spec.workload, None)
    return record_build(spec, build, inputs, workload.name, new_tokens, backward=backward, warm_up=True)


def main(argv: list[str]) -> int:
    import json

    from ..fileops import write_text_atomic
    from ..result import run_main

    p = argparse.ArgumentParser(description="Record the model's ATen operators for its workload on CPU.")
    p.add_argument("--spec", default="adaptation.json")
    p.add_argument("--out", default="op_profile.json")
    p.add_argument("--new-tokens", type=int, default=3, help="generated tokens recorded (generating families)")
    p.add_argument(
        "--backward",
        action="store_true",
        help="the model is trained: record one training step's forward and backward too",
    )
    args = p.parse_args(argv)

    def run() -> dict[str, Any]:
        data = record_workload(Path(args.spec), args.new_tokens, args.backward)
        write_text_atomic(Path(args.out), json.dumps(data, indent=1) + "\n")
        print(f"{len(data['ops'])} ops recorded ({', '.join(data['phases'])}) -> {args.out}", flush=True)
        return {"ok": True, "ops": len(data["ops"]), "profile": args.out, "error": None}

    return run_main(run)


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
