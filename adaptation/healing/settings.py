"""Healing settings: from the stage context's settings, else the environment, else defaults.

The team lead passes per-run settings through StageContext.settings; a person running the
stage by hand sets ASCENDBRIDGE_HEALING_* variables.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

from adaptation import uv_env

DEFAULT_MAX_ATTEMPTS = 4


@dataclass(frozen=True)
class HealingSettings:
    max_attempts: int = DEFAULT_MAX_ATTEMPTS  # runs in total, the first included
    device: str = "cpu"  # demo.py --device; selects the extra (cpu -> cpu, npu -> ascend)
    demo_timeout_s: float = uv_env.DEMO_TIMEOUT_S
    sync_timeout_s: float = uv_env.SYNC_TIMEOUT_S
    real_weights: bool = True  # run demo.py with real weights when they are available

    @property
    def profile(self) -> str:
        return uv_env.profile_for_device(self.device)

    @classmethod
    def from_sources(cls, settings: Mapping[str, Any] | None = None) -> "HealingSettings":
        """Read healing_* keys from `settings`, then ASCENDBRIDGE_HEALING_* / ASCENDBRIDGE_DEVICE."""
        settings = settings or {}

        def pick(key: str, env: str, default: Any) -> Any:
            if settings.get(key) is not None:
                return settings[key]
            return os.environ.get(env, default)

        try:
            result = cls(
                max_attempts=int(pick("healing_max_attempts", "ASCENDBRIDGE_HEALING_MAX_ATTEMPTS",
                                      DEFAULT_MAX_ATTEMPTS)),
                device=str(pick("device", "ASCENDBRIDGE_DEVICE", "cpu")),
                demo_timeout_s=float(pick("healing_demo_timeout_s", "ASCENDBRIDGE_HEALING_DEMO_TIMEOUT_S",
                                          uv_env.DEMO_TIMEOUT_S)),
                sync_timeout_s=float(pick("healing_sync_timeout_s", "ASCENDBRIDGE_HEALING_SYNC_TIMEOUT_S",
                                          uv_env.SYNC_TIMEOUT_S)),
                real_weights=str(pick("healing_real_weights", "ASCENDBRIDGE_HEALING_REAL_WEIGHTS", "1")).lower()
                not in ("0", "false", "no", "off"),
            )
        except ValueError as exc:
            raise ValueError(f"bad healing setting: {exc}") from None
        if result.max_attempts < 1:
            raise ValueError("healing_max_attempts must be at least 1")
        result.profile  # validates the device name
        return result
