"""Benchmark settings (ascendbridge.settings): `--set benchmark.KEY`, then ASCENDBRIDGE_BENCHMARK_*, then defaults."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from ab_runtime import sizing
from ascendbridge.package import uv_env
from ascendbridge.package.device_settings import DeviceSettings

DTYPES = ("float32", "bfloat16", "float16")


class BenchmarkSettings(DeviceSettings):
    model_config = SettingsConfigDict(env_prefix="ASCENDBRIDGE_BENCHMARK_")
    key_prefix = "benchmark_"

    dtypes: Annotated[tuple[str, ...], NoDecode] = ()  # empty: the spec's target dtype, then bfloat16
    warmup: int = Field(3, ge=0)
    iters: int = Field(10, ge=1)  # at most: fewer when one call says they would not fit budget_s
    # Seconds one timing (reference, target, each workload batch) may spend, warm-up included:
    # ab_runtime/sizing.py cuts the timed calls to fit, never under its floor of 5.
    budget_s: float = Field(sizing.BUDGET_S, gt=0)
    num_samples: int = Field(2, ge=1)
    real_weights: bool = True  # --use-pretrained when weights are available
    # Workload profile (ab_runtime/workloads.py); None: the spec's, else the task family's default.
    workload: Literal["generation", "encoder_generation", "batch_sweep", "forward"] | None = None
    timeout_s: float = Field(900.0, gt=0)  # one accuracy_run.py
    sync_timeout_s: float = Field(uv_env.SYNC_TIMEOUT_S, gt=0)
    # How much better than the gate's re-timing (its fastest call, or its model/probe ratio) a
    # reported timing may be and still pass (benchmark/gate.py, ab_runtime/calibration.py);
    # None: its default (x1.5). A finite number >= 1.
    latency_band: float | None = Field(None, ge=1.0, allow_inf_nan=False, validation_alias="ascendbridge_latency_band")

    @field_validator("dtypes", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        return tuple(value.replace(",", " ").split()) if isinstance(value, str) else value

    @field_validator("dtypes")
    @classmethod
    def _known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [d for d in value if d not in DTYPES]
        if bad:
            raise ValueError(f"bad benchmark dtype(s) {', '.join(bad)} (expected: {', '.join(DTYPES)})")
        return value

    def dtypes_for(self, target: str) -> list[str]:
        """The dtypes to run: configured ones, or the spec's target followed by bfloat16."""
        chosen = list(self.dtypes) or [target, "bfloat16"]
        return list(dict.fromkeys(chosen))
