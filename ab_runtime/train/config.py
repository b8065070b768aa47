"""One training job's configuration (train.json): the fields, their defaults and what is refused.

Its own module so that every part of the Trainer (data.py, guards.py, checkpoint.py) can name it
without importing the harness that composes them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ..errors import SpecError

STRATEGIES = ("auto", "single", "ddp", "fsdp2", "device_map")
PRECISIONS = ("fp32", "bf16-autocast")  # asked; the size rule may hold the weights in bf16 instead
BF16_WEIGHTS = "bf16-weights"  # the precision choose_precision gives above its threshold
METHODS = ("full", "lora")
# fused_adamw: torch.optim.AdamW(fused=True) (where torch_npu's NpuFusedAdamW is not already used);
# compile: torch.compile of the model's forward (nn.Module.compile: parameter names unchanged)
# no_uninit_fill: deterministic mode without filling every new tensor with NaN first
# (torch.utils.deterministic.fill_uninitialized_memory, a debugging aid: the same kernels run)
TRAINING_PASSES = ("fused_adamw", "compile", "no_uninit_fill")


@dataclass
class TrainConfig:
    """One training job (train.json). Defaults suit the tiny demo models on a CPU."""

    model_dir: str
    corpus: str
    steps: int = 30
    method: str = "full"
    seq_len: int = 64
    batch: int = 8  # global batch: split over the ranks
    accumulation: int = 1  # micro-batches per rank per step (each of batch / ranks / accumulation blocks)
    lr: float = 1e-3
    warmup: int = 0
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    seed: int = 0
    precision: str = "fp32"
    device: str = "cpu"
    strategy: str = "single"  # auto: choose_strategy from the parameter count, device memory and process count
    # bf16 weights when the float32 training state is above this fraction of the job's device memory (None: never)
    bf16_weights_above: float | None = 1.0
    checkpoint_every: int = 10
    keep_last: int = 2
    lora_rank: int = 8
    lora_alpha: float = 16.0
    lora_targets: list[str] = field(default_factory=list)
    spike_factor: float = 5.0  # a loss above spike_factor x the median of the last SPIKE_WINDOW losses stops the run
    config_overrides: dict[str, Any] = field(default_factory=dict)  # set on the model config (e.g. dropout)
    proxy_depth: int | None = None  # a registered reduced-depth proxy: layers per stack (ab_runtime.depth.proxy_config)
    # injected faults for tests and gates: nan_at_step, spike_at_step, hang_at_step, and
    # oom_above_micro_batch (from oom_at_step, default 1, a micro-batch above it raises an out-of-memory error)
    fault: dict[str, int] = field(default_factory=dict)
    # training optimization passes the run applies (passes.py: kept only when the search measured a
    # confirmed gain and the losses held the contract's loss bounds)
    passes: list[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpecError(f"unknown training setting(s): {', '.join(unknown)}")
        try:
            config = cls(**data)
        except TypeError as exc:
            raise SpecError(f"training config: {exc}") from None
        for name, allowed in (("strategy", STRATEGIES), ("precision", PRECISIONS), ("method", METHODS)):
            if getattr(config, name) not in allowed:
                raise SpecError(f"training {name} {getattr(config, name)!r} is not one of {', '.join(allowed)}")
        if config.bf16_weights_above is not None and not (
            isinstance(config.bf16_weights_above, (int, float)) and config.bf16_weights_above >= 0
        ):
            raise SpecError(f"training bf16_weights_above {config.bf16_weights_above!r} is not a fraction >= 0 or null")
        if unknown_passes := sorted(set(config.passes) - set(TRAINING_PASSES)):
            raise SpecError(
                f"unknown training pass(es) {', '.join(unknown_passes)} (known: {', '.join(TRAINING_PASSES)})"
            )
        if config.steps < 1 or config.batch < 1 or config.seq_len < 2 or config.accumulation < 1:
            raise SpecError("training needs steps >= 1, batch >= 1, seq_len >= 2 and accumulation >= 1")
        return config

    @classmethod
    def load(cls, path: Path) -> TrainConfig:
        try:
            return cls.from_dict(json.loads(Path(path).read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            raise SpecError(f"{path}: cannot read the training config ({exc})") from None
