"""The package checker (adaptation/scripts/check_adaptation.py), run as a separate process: the
adaptation stage's agent escalation, the healer's agent escalation and the healing gate all accept
a package only through it. It is run by path, never imported, so no stage imports another."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from ascendbridge.package import uv_env
from ascendbridge.gatekit.checker import checker_gate
from ascendbridge.settings import StageSettings

CHECKER = Path(__file__).resolve().parents[2] / "adaptation" / "scripts" / "check_adaptation.py"


class CheckSettings(StageSettings):
    """Where and how long the checker's dry run runs: the healing settings' device and demo timeout
    (HealingSettings extends this), so every caller checks a package the same way."""

    model_config = SettingsConfigDict(env_prefix="ASCENDBRIDGE_HEALING_")
    key_prefix = "healing_"

    device: str = Field("cpu", validation_alias="ascendbridge_device")  # demo.py --device; selects the extra
    demo_timeout_s: float = Field(uv_env.DEMO_TIMEOUT_S, gt=0)

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        uv_env.profile_for_device(value)  # validates the device name (the error names the key)
        return value


def run_package_checker(name: str, root: Path, device: str, timeout_s: float) -> tuple[bool, str, dict[str, Any]]:
    """(passed, summary, report) of the package checker's full run (the demo included)."""
    result = checker_gate(CHECKER, ["--adapt", name, "--adaptations-dir", str(root), "--device", device,
                                    "--timeout", str(timeout_s)], timeout_s + 600)
    return result.passed, result.summary, result.report
