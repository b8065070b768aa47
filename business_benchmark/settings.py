"""Business benchmark settings: the stage context's settings, else ASCENDBRIDGE_* variables, else defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from adaptation import uv_env
from business_benchmark.pass_rule import PassRule

DTYPES = ("float32", "bfloat16", "float16")


def _bounds(raw: Any) -> dict[str, float]:
    """`name=value,name=value` (or a dict) -> {name: value}."""
    if isinstance(raw, dict):
        return {str(k): float(v) for k, v in raw.items()}
    out = {}
    for item in filter(None, (p.strip() for p in str(raw or "").split(","))):
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"business bound '{item}' is not name=value")
        out[name.strip()] = float(value)
    return out


@dataclass(frozen=True)
class BusinessSettings:
    device: str = "cpu"
    dtype: Optional[str] = None  # None: the spec's target, or bfloat16 when that is float32
    real_weights: bool = True
    max_items: int = 0  # per set; 0 = all
    rule: PassRule = field(default_factory=PassRule)
    lm_eval_tasks: tuple[str, ...] = ()
    lm_eval_include: Optional[str] = None
    lm_eval_limit: int = 0
    threads: int = 0  # torch intra-op threads for business_run.py (0: torch's default)
    run_timeout_s: float = 1800.0
    sync_timeout_s: float = uv_env.SYNC_TIMEOUT_S

    @property
    def profile(self) -> str:
        return uv_env.profile_for_device(self.device)

    def dtype_for(self, spec_target: str) -> str:
        """A float32 target compared with the float32 reference on the same CPU would test nothing:
        then the business run uses bfloat16, the dtype a deployment would pick."""
        if self.dtype:
            return self.dtype
        return "bfloat16" if spec_target == "float32" else spec_target

    @classmethod
    def from_sources(cls, settings: Optional[Mapping[str, Any]] = None) -> "BusinessSettings":
        settings = settings or {}

        def pick(key: str, env: str, default: Any) -> Any:
            if settings.get(key) is not None:
                return settings[key]
            return os.environ.get(env, default)

        dtype = pick("business_dtype", "ASCENDBRIDGE_BUSINESS_DTYPE", "") or None
        if dtype is not None and dtype not in DTYPES:
            raise ValueError(f"bad business dtype {dtype} (expected: {', '.join(DTYPES)})")
        raw_rtol = pick("business_rtol", "ASCENDBRIDGE_BUSINESS_RTOL", "")
        tasks = pick("business_lm_eval", "ASCENDBRIDGE_BUSINESS_LM_EVAL", "")
        try:
            rule = PassRule.tightened(float(raw_rtol) if raw_rtol not in ("", None) else None,
                                      _bounds(pick("business_bounds", "ASCENDBRIDGE_BUSINESS_BOUNDS", "")))
            result = cls(
                device=str(pick("device", "ASCENDBRIDGE_DEVICE", "cpu")),
                dtype=dtype,
                real_weights=str(pick("business_real_weights", "ASCENDBRIDGE_BUSINESS_REAL_WEIGHTS", "1")).lower()
                not in ("0", "false", "no", "off"),
                max_items=int(pick("business_max_items", "ASCENDBRIDGE_BUSINESS_MAX_ITEMS", 0)),
                rule=rule,
                lm_eval_tasks=tuple(tasks.replace(",", " ").split()) if isinstance(tasks, str) else tuple(tasks),
                lm_eval_include=pick("business_lm_eval_include", "ASCENDBRIDGE_BUSINESS_LM_EVAL_INCLUDE", "") or None,
                lm_eval_limit=int(pick("business_lm_eval_limit", "ASCENDBRIDGE_BUSINESS_LM_EVAL_LIMIT", 0)),
                threads=int(pick("business_threads", "ASCENDBRIDGE_BUSINESS_THREADS", 0)),
                run_timeout_s=float(pick("business_timeout_s", "ASCENDBRIDGE_BUSINESS_TIMEOUT_S", 1800.0)),
            )
        except ValueError as exc:
            raise ValueError(f"bad business setting: {exc}") from None
        if result.max_items < 0 or result.threads < 0:
            raise ValueError("bad business setting: business_max_items and business_threads must be >= 0")
        result.profile  # validates the device name
        return result
