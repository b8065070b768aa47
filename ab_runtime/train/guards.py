"""What stops or retries a training step: the guards (a non-finite loss or gradient norm, a loss
spike), the out-of-memory ladder (halve the micro-batch and retry), the heartbeat the supervisor's
hang watch reads, and the faults the tests inject (a CPU cannot run out of memory or hang safely).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..device import DeviceChoice, empty_cache
from ..errors import RuntimeDiagnosis
from ..fileops import write_text_atomic

if TYPE_CHECKING:
    from .config import TrainConfig

SPIKE_WINDOW = 10
# torch_npu reports an exhausted device as a plain RuntimeError "NPU out of memory. Tried to
# allocate ..." (as quoted in vllm-project/vllm-ascend#19); CUDA raises torch.OutOfMemoryError.
OOM_MESSAGES = ("NPU out of memory",)


class TrainingStopped(RuntimeDiagnosis):
    """A guard stopped the run; `diagnosis` says which rule, at which step, with its figures."""

    kind = "training_stopped"

    def __init__(self, diagnosis: dict[str, Any]) -> None:
        super().__init__(diagnosis["summary"])
        self.diagnosis = diagnosis


def is_out_of_memory(exc: BaseException) -> bool:
    """An error the out-of-memory ladder answers (CUDA's class, or torch_npu's RuntimeError text)."""
    return isinstance(exc, torch.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and any(text in str(exc) for text in OOM_MESSAGES)
    )


def heartbeat(out: Path, rank: int, step: int, phase: str) -> None:
    """The heartbeat the supervisor watches (rank 0): the step clock applies in phase "train" only."""
    if rank == 0:
        write_text_atomic(
            out / "heartbeat.json", json.dumps({"step": step, "time": time.time(), "pid": os.getpid(), "phase": phase})
        )


class GuardsPart:
    """The Trainer's guards: checked on every step, before its update is applied."""

    cfg: TrainConfig
    out: Path
    rank: int
    device: DeviceChoice
    optimizer: torch.optim.Optimizer
    micro_batch: int
    oom_fallbacks: list[dict[str, Any]]
    losses: list[float]

    def _maybe_oom(self, step: int, micro_batch: int) -> None:
        """The injected out-of-memory error (fault.oom_above_micro_batch, from fault.oom_at_step):
        a CPU cannot run out of memory safely, so the ladder's tests raise what CUDA would, after
        the micro-batch's forward and backward (a retry must undo their random draws and gradients)."""
        limit = self.cfg.fault.get("oom_above_micro_batch")
        if limit is not None and step >= self.cfg.fault.get("oom_at_step", 1) and micro_batch > limit:
            raise torch.OutOfMemoryError(
                f"injected: out of memory at micro-batch {micro_batch} (fault.oom_above_micro_batch {limit})"
            )

    def _fall_back(self, step: int, error: str) -> None:
        """The ladder's rung: drop the partial gradients, free the cache, halve the micro-batch;
        at micro-batch 1 there is no rung left and the run stops with the diagnosis."""
        self.optimizer.zero_grad(set_to_none=True)
        empty_cache(self.device)
        if self.micro_batch == 1:
            raise TrainingStopped(
                {
                    "rule": "out_of_memory",
                    "step": step,
                    "micro_batch": 1,
                    "error": error,
                    "oom_fallbacks": self.oom_fallbacks,
                    "summary": f"step {step}: out of memory at micro-batch 1 ({error}); the update was "
                    "not applied (a shorter seq_len, bf16-autocast, LoRA or FSDP2 over more "
                    "devices needs less memory)",
                }
            )
        self.oom_fallbacks.append({"step": step, "from": self.micro_batch, "to": self.micro_batch // 2, "error": error})
        self.micro_batch //= 2

    def _maybe_hang(self, step: int) -> None:
        """The injected hang (fault.hang_at_step): once per output directory, so a resumed run passes it."""
        marker = self.out / "fault-hang-done"
        if self.cfg.fault.get("hang_at_step") == step and not marker.exists():
            if self.rank == 0:
                marker.write_text(f"hung at step {step}\n")
            time.sleep(3600)

    def _guard(self, step: int, loss: float, grad_norm: float) -> None:
        """Stop on a non-finite loss or gradient norm, or a loss spike, before the update is applied."""
        if not math.isfinite(loss) or not math.isfinite(grad_norm):
            raise TrainingStopped(
                {
                    "rule": "non_finite",
                    "step": step,
                    "loss": loss,
                    "grad_norm": grad_norm,
                    "summary": f"step {step}: loss {loss} / gradient norm {grad_norm} is not finite; "
                    "the update was not applied (check the learning rate, precision and data)",
                }
            )
        recent = self.losses[-SPIKE_WINDOW:]
        if len(recent) >= 3 and loss > self.cfg.spike_factor * statistics.median(recent):
            median = statistics.median(recent)
            raise TrainingStopped(
                {
                    "rule": "loss_spike",
                    "step": step,
                    "loss": loss,
                    "median": median,
                    "summary": f"step {step}: loss {loss:.4g} is above {self.cfg.spike_factor:g} x the median "
                    f"{median:.4g} of the last {len(recent)} steps; the update was not applied",
                }
            )
