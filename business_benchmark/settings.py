"""Business benchmark settings (ascendbridge.settings): `--set business_benchmark.KEY`, then
ASCENDBRIDGE_BUSINESS_*, then defaults. The pass rule may only be tightened (PassRule.tightened)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from ascendbridge.package import uv_env
from ascendbridge.package.device_settings import DeviceSettings
from ascendbridge.settings import one_of
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


class BusinessSettings(DeviceSettings):
    model_config = SettingsConfigDict(env_prefix="ASCENDBRIDGE_BUSINESS_")
    key_prefix = "business_"

    dtype: str | None = None  # None: the spec's target, or bfloat16 when that is float32
    real_weights: bool = True
    max_items: int = Field(0, ge=0)  # per set; 0 = all
    rtol: float | None = None  # relative tolerance of the task metric; only a tighter one is taken
    bounds: Annotated[dict[str, float], NoDecode] = {}  # agreement bounds, `name=value,...`; only tighter
    lm_eval_tasks: Annotated[tuple[str, ...], NoDecode] = Field((), validation_alias="ascendbridge_business_lm_eval")
    lm_eval_include: str | None = None
    lm_eval_limit: int = Field(0, ge=0)
    threads: int = Field(0, ge=0)  # torch intra-op threads for business_run.py (0: torch's default)
    run_timeout_s: float = Field(1800.0, gt=0, validation_alias="ascendbridge_business_timeout_s")
    sync_timeout_s: float = Field(uv_env.SYNC_TIMEOUT_S, gt=0)

    @field_validator("dtype", "rtol", "lm_eval_include", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, value: str | None) -> str | None:
        return None if value is None else one_of("business dtype", value, DTYPES)

    @field_validator("rtol")
    @classmethod
    def _tighter_rtol(cls, value: float | None) -> float | None:
        PassRule.tightened(rtol=value)  # refuses a looser one
        return value

    @field_validator("bounds", mode="before")
    @classmethod
    def _tighter_bounds(cls, value: object) -> dict[str, float]:
        bounds = _bounds(value)
        PassRule.tightened(bounds=bounds)  # refuses an unknown metric or a looser bound
        return bounds

    @field_validator("lm_eval_tasks", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        return tuple(value.replace(",", " ").split()) if isinstance(value, str) else value

    @property
    def rule(self) -> PassRule:
        """The framework's pass rule with this run's tightenings."""
        return PassRule.tightened(self.rtol, self.bounds)

    def dtype_for(self, spec_target: str) -> str:
        """A float32 target compared with the float32 reference on the same CPU would test nothing:
        then the business run uses bfloat16, the dtype a deployment would pick."""
        if self.dtype:
            return self.dtype
        return "bfloat16" if spec_target == "float32" else spec_target
