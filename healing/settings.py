"""Healing settings (ascendbridge.settings): `--set healing.KEY`, then ASCENDBRIDGE_HEALING_*, then defaults."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from ascendbridge.package import uv_env
from ascendbridge.package.checker import CheckSettings

DEFAULT_MAX_ATTEMPTS = 4


class HealingSettings(CheckSettings):
    model_config = SettingsConfigDict(env_prefix="ASCENDBRIDGE_HEALING_")
    key_prefix = "healing_"

    max_attempts: int = Field(DEFAULT_MAX_ATTEMPTS, ge=1)  # runs in total, the first included
    sync_timeout_s: float = Field(uv_env.SYNC_TIMEOUT_S, gt=0)
    real_weights: bool = True  # run demo.py with real weights when they are available
