"""Benchmark settings: the stage context's settings, else ASCENDBRIDGE_* variables, else defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from adaptation import uv_env

DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class BenchmarkSettings:
    device: str = "cpu"  # accuracy_run.py --device; selects the extra (npu -> ascend)
    dtypes: tuple[str, ...] = ()  # empty: the spec's target dtype, then bfloat16
    warmup: int = 3
    iters: int = 10
    num_samples: int = 2
    real_weights: bool = True  # --use-pretrained when weights are available
    run_timeout_s: float = 900.0
    sync_timeout_s: float = uv_env.SYNC_TIMEOUT_S

    @property
    def profile(self) -> str:
        return uv_env.profile_for_device(self.device)

    def dtypes_for(self, target: str) -> list[str]:
        """The dtypes to run: configured ones, or the spec's target followed by bfloat16."""
        chosen = list(self.dtypes) or [target, "bfloat16"]
        return list(dict.fromkeys(chosen))

    @classmethod
    def from_sources(cls, settings: Optional[Mapping[str, Any]] = None) -> "BenchmarkSettings":
        settings = settings or {}

        def pick(key: str, env: str, default: Any) -> Any:
            if settings.get(key) is not None:
                return settings[key]
            return os.environ.get(env, default)

        raw_dtypes = pick("benchmark_dtypes", "ASCENDBRIDGE_BENCHMARK_DTYPES", "")
        dtypes = tuple(raw_dtypes.replace(",", " ").split()) if isinstance(raw_dtypes, str) else tuple(raw_dtypes)
        bad = [d for d in dtypes if d not in DTYPES]
        if bad:
            raise ValueError(f"bad benchmark dtype(s) {', '.join(bad)} (expected: {', '.join(DTYPES)})")
        try:
            result = cls(
                device=str(pick("device", "ASCENDBRIDGE_DEVICE", "cpu")),
                dtypes=dtypes,
                warmup=int(pick("benchmark_warmup", "ASCENDBRIDGE_BENCHMARK_WARMUP", 3)),
                iters=int(pick("benchmark_iters", "ASCENDBRIDGE_BENCHMARK_ITERS", 10)),
                num_samples=int(pick("benchmark_num_samples", "ASCENDBRIDGE_BENCHMARK_NUM_SAMPLES", 2)),
                real_weights=str(pick("benchmark_real_weights", "ASCENDBRIDGE_BENCHMARK_REAL_WEIGHTS", "1")).lower()
                not in ("0", "false", "no", "off"),
                run_timeout_s=float(pick("benchmark_timeout_s", "ASCENDBRIDGE_BENCHMARK_TIMEOUT_S", 900.0)),
            )
        except ValueError as exc:
            raise ValueError(f"bad benchmark setting: {exc}") from None
        if result.warmup < 0 or result.iters < 1 or result.num_samples < 1:
            raise ValueError("benchmark settings: warmup >= 0, iters >= 1 and num_samples >= 1 required")
        result.profile  # validates the device name
        return result
