"""A model as the passes leave it (`Build`) and how every stage calls it: the measurement harness,
the benchmark and business runs, the decoders and the optimizer all build and call a model through
these few functions, so the one place a pass's effect (contexts, autocast, compile, input dtype and
layout) is applied is here. The pass catalogue that edits a Build is `ab_runtime.optimize.passes`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


@dataclass
class Build:
    """A model being optimized; passes edit it, `finalize` makes it callable."""

    model: torch.nn.Module
    device_kind: str
    input_dtype: torch.dtype
    accuracy_dtype: str  # the dtype the outputs are computed in (recorded; passes are judged by the budget)
    autocast: torch.dtype | None = None
    channels_last: bool = False
    contexts: list[Callable[[], Any]] = field(default_factory=list)
    compile_kwargs: dict[str, Any] | None = None
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # The operator acceptance contract's verdicts on the replacements the passes applied or refused
    # (ab_runtime.ops.acceptance; one per replacement, module class and dtype).
    acceptance: list[dict[str, Any]] = field(default_factory=list)
    # A decode pass's decoder factory `(build, model, encoder_decoder, new_tokens) -> workloads.Decoder`
    # (set by the kind-`decode` passes); None: eager decoding through the model's own KV cache
    # (workloads.HFDecoder).
    decoder: Callable[[Build, torch.nn.Module, bool, int], Any] | None = None


def finalize(b: Build, flags: dict[str, Any]) -> Callable[[dict[str, Any]], Any]:
    """A callable `run(inputs) -> outputs` that applies the Build's contexts, autocast and compile."""
    module: Any = b.model
    if b.compile_kwargs is not None:
        module = torch.compile(b.model, **b.compile_kwargs)

    def run(inputs: dict[str, Any]) -> Any:
        with build_contexts(b):
            return module(**inputs, **flags)

    return run


@contextlib.contextmanager
def build_contexts(b: Build) -> Iterator[None]:
    """The Build's contexts and autocast, for any call into its model (a forward, an encoder)."""
    with contextlib.ExitStack() as stack:
        for make in b.contexts:
            stack.enter_context(make())
        if b.autocast is not None:
            stack.enter_context(torch.autocast(b.device_kind, dtype=b.autocast))
        yield


def prepare_inputs(inputs: dict[str, Any], device: str, b: Build) -> dict[str, Any]:
    """Inputs on `device`; floating ones in the Build's input dtype (channels_last for 4-D images)."""
    out = {}
    for name, value in inputs.items():
        if isinstance(value, torch.Tensor):
            value = value.to(device=device, dtype=b.input_dtype if value.is_floating_point() else value.dtype)
            if b.channels_last and value.dim() == 4 and value.is_floating_point():
                value = value.contiguous(memory_format=torch.channels_last)
        out[name] = value
    return out
