"""The reference (CPU float32) and the target (device, dtype) models, run on the same inputs.

Each side is a harness Build (ab_build.Build with no passes: the benchmark's target model), so a
forward here is the harness's forward (its input placement, its contexts), and every call is
timed on measure.clocked (the device synchronised before and after). Greedy tokens come from the
runtime's one decoder (workloads.HFDecoder through workloads.generate, the benchmark's): the
prompt prefilled once, then one cached step per token.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .. import build as ab_build
from .. import device as ab_device
from .. import workloads
from ..inputs import forward_flags
from ..measure import clocked

NEW_TOKENS = 8  # greedy tokens per prompt / source
SIDES = ("reference", "target")


class Pair:
    """Both models, their forwards and the seconds each spent on the current evaluation."""

    def __init__(
        self,
        reference: torch.nn.Module,
        target: torch.nn.Module,
        choice: Any,
        dtype: torch.dtype,
        dtype_name: str,
        config: Any,
    ) -> None:
        self.builds = {
            "reference": ab_build.Build(reference, "cpu", torch.float32, "float32"),
            "target": ab_build.Build(target, choice.kind, dtype, dtype_name),
        }
        self.devices = {"reference": "cpu", "target": choice.torch_device}
        flags = forward_flags(reference)
        self.runs = {which: ab_build.finalize(b, flags) for which, b in self.builds.items()}
        self.syncs: dict[str, Callable[[], None]] = {
            "reference": lambda: None,
            "target": lambda: ab_device.synchronize(choice),
        }
        self.choice, self.config = choice, config
        self.seconds = {"reference": 0.0, "target": 0.0}
        self.embeddings: dict[tuple[str, str], list[float]] = {}

    def model(self, which: str) -> torch.nn.Module:
        return self.builds[which].model

    def prepare(self, which: str, inputs: dict[str, Any]) -> dict[str, Any]:
        """Inputs on the side's device, floating ones in its dtype."""
        return ab_build.prepare_inputs(inputs, self.devices[which], self.builds[which])

    def forward(self, which: str, **inputs: Any) -> Any:
        """One timed forward of `which` ("reference" or "target")."""
        moved = self.prepare(which, inputs)
        with torch.inference_mode():
            out, ms = clocked(lambda: self.runs[which](moved), self.syncs[which])
        self.seconds[which] += ms / 1000.0
        return out

    def greedy(self, which: str, inputs: dict[str, Any], encoder_decoder: bool) -> list[int]:
        """NEW_TOKENS greedy tokens of one prompt (batch 1), timed phase by phase."""
        build = self.builds[which]
        decoder = workloads.decoder_for(build, build.model, encoder_decoder, NEW_TOKENS)
        with torch.inference_mode():
            run = workloads.generate(
                decoder, self.prepare(which, inputs), NEW_TOKENS, self.syncs[which], encoder_decoder
            )
        self.seconds[which] += (run.ttft_ms + sum(run.steps_ms)) / 1000.0
        return [int(t) for t in run.tokens[0]]
