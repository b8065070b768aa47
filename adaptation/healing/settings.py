"""Healing settings (ascendbridge.settings): `--set healing.KEY`, then ASCENDBRIDGE_HEALING_*, then defaults."""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from adaptation import uv_env
from ascendbridge.settings import StageSettings

DEFAULT_MAX_ATTEMPTS = 4


class HealingSettings(StageSettings):
    model_config = SettingsConfigDict(env_prefix="ASCENDBRIDGE_HEALING_")
    key_prefix = "healing_"

    max_attempts: int = Field(DEFAULT_MAX_ATTEMPTS, ge=1)  # runs in total, the first included
    device: str = Field("cpu", validation_alias="ascendbridge_device")  # demo.py --device; selects the extra
    demo_timeout_s: float = Field(uv_env.DEMO_TIMEOUT_S, gt=0)
    sync_timeout_s: float = Field(uv_env.SYNC_TIMEOUT_S, gt=0)
    real_weights: bool = True  # run demo.py with real weights when they are available

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        uv_env.profile_for_device(value)  # validates the device name
        return value

    @property
    def profile(self) -> str:
        return uv_env.profile_for_device(self.device)
