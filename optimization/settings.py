"""Optimization settings (ascendbridge.settings): `--set optimization.KEY`, then
ASCENDBRIDGE_OPTIMIZATION_*, then defaults."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from ascendbridge.package.device_settings import DeviceSettings


class OptimizationSettings(DeviceSettings):
    model_config = SettingsConfigDict(env_prefix="ASCENDBRIDGE_OPTIMIZATION_")
    key_prefix = "optimization_"

    pairs: int = Field(5, ge=5)  # paired, interleaved blocks (at least 5: docs/optimization.md)
    iters: int = Field(5, ge=1)
    warmup: int = Field(2, ge=0)
    num_samples: int = Field(2, ge=1)
    min_gain: float = Field(0.02, ge=0)
    passes: str = ""  # comma-separated subset of the catalogue; empty = all for the device
    real_weights: bool = True
    timeout_s: float = Field(1800.0, gt=0)
    # The workload whose headline figure is optimized (ab_runtime/workloads.py); None: the spec's,
    # else the task family's default (generation: TPOT; encoders: throughput at headline_batch).
    workload: Literal["generation", "encoder_generation", "batch_sweep", "forward"] | None = None

    def common_args(self, pretrained: bool) -> list[str]:
        return [
            "--device",
            self.device,
            "--pairs",
            str(self.pairs),
            "--iters",
            str(self.iters),
            "--warmup",
            str(self.warmup),
            "--num-samples",
            str(self.num_samples),
        ] + (["--use-pretrained"] if pretrained else [])
