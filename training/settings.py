"""Training settings (ascendbridge.settings): `--set training.KEY`, then ASCENDBRIDGE_TRAINING_*, then
defaults. The job itself (corpus, method, steps) is the model's, from its registration on the board."""

from __future__ import annotations

import json
import math
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from ab_runtime.train.config import TRAINING_PASSES
from ascendbridge.package import uv_env
from ascendbridge.package.device_settings import DeviceSettings
from ascendbridge.settings import one_of

PRECISIONS = ("fp32", "bf16-autocast")  # ab_runtime/train/config.py PRECISIONS


class TrainingSettings(DeviceSettings):
    model_config = SettingsConfigDict(env_prefix="ASCENDBRIDGE_TRAINING_")
    key_prefix = "training_"

    precision: str = "bf16-autocast"  # the target's precision (fp32 master weights always)
    seq_len: int = Field(64, ge=2)
    batch: int = Field(8, ge=1)  # global batch, split over the processes
    accumulation: int = Field(1, ge=1, le=1024)  # micro-batches per process per step (gradient accumulation)
    lr: float = Field(1e-3, gt=0)
    seed: int = Field(0, ge=0)
    lora_rank: int = Field(8, ge=1)
    # bf16 weights when the float32 training state is above this fraction of the job's device memory
    # (ab_runtime/train/harness.py choose_precision); "off" turns the size rule off (null in train.json:
    # the settings layer reads None as unset, so it cannot carry the harness's null)
    bf16_weights_above: float | Literal["off"] = 1.0
    # training optimization passes the stage tries after the contract (ab_runtime/train/passes.py),
    # comma-separated; "" tries none. compile (torch.compile) is left out by default: its compile
    # costs more than a short job can win back on a CPU
    passes: str = "fused_adamw"
    contract_steps: int = Field(4, ge=1)  # K: steps of the baseline contract (target vs CPU float32 reference)
    checkpoint_every: int = Field(10, ge=1)  # at most half the steps (the gate re-runs a step after one)
    keep_last: int = Field(2, ge=2)  # the final checkpoint and at least one before it
    hang_k: float = Field(10.0, gt=1)  # a hang: no step for hang_k x the median step time
    max_restarts: int = Field(2, ge=0)  # hang or kill restarts (from the last good checkpoint) within one attempt
    startup_s: float = Field(300.0, gt=0)  # allowed before the first step, and while checkpointing / evaluating
    threads: int = Field(0, ge=0)  # torch intra-op threads (OMP_NUM_THREADS; 0: torch's default)
    run_timeout_s: float = Field(7200.0, gt=0)
    sync_timeout_s: float = Field(uv_env.SYNC_TIMEOUT_S, gt=0)
    # host acceptance before the job (training/preflight.py; docs/training.md "Host acceptance"): off | warn | refuse
    host_acceptance: Literal["off", "warn", "refuse"] = "warn"
    acceptance_min_ratio: float = Field(0.5, gt=0, le=1)  # a figure under this x its expectation is a warning
    acceptance_long_steps: int = Field(200, ge=1)  # "refuse" refuses jobs of at least this many steps
    acceptance_budget_s: float = Field(1.0, gt=0, le=30)  # timed seconds per measured figure
    # test-only: the harness's injected faults (ab_runtime/train/config.py TrainConfig.fault, e.g.
    # {"nan_at_step": 5}) in the training run's config; never in the contract's, dropped by the gate's re-run
    fault: Annotated[dict[str, int], NoDecode] = {}  # JSON (--set or the variable); pydantic copies the default

    @field_validator("passes")
    @classmethod
    def _passes(cls, value: str) -> str:
        for name in (p for p in value.split(",") if p):
            one_of("training pass", name, TRAINING_PASSES)
        return value

    def pass_list(self) -> list[str]:
        return [p for p in self.passes.split(",") if p]

    @field_validator("precision")
    @classmethod
    def _precision(cls, value: str) -> str:
        return one_of("training precision", value, PRECISIONS)

    @field_validator("bf16_weights_above", mode="before")
    @classmethod
    def _fraction_or_off(cls, value: object) -> object:
        """A finite number >= 0 (text from the environment too) or "off"; a boolean is no fraction
        (pydantic would take true as 1.0) and infinity would not survive the JSON trip to a worker."""
        if value == "off":
            return value
        number = math.nan
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            try:
                number = float(value)
            except ValueError:
                pass
        if not (math.isfinite(number) and number >= 0):
            raise ValueError(f"{value!r} is not a fraction >= 0 of the device memory, or off")
        return number

    @field_validator("fault", mode="before")
    @classmethod
    def _fault_json(cls, value: object) -> object:
        """A JSON object from the environment or a `--set` that did not parse: a bad one is a ValueError,
        the one-line refusal, not pydantic-settings' own decoding error."""
        return json.loads(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _accumulation(self) -> TrainingSettings:
        if self.batch % self.accumulation:
            raise ValueError(
                f"training batch {self.batch} does not split into {self.accumulation} micro-batches "
                "(training.accumulation must divide training.batch)"
            )
        return self
