"""The package checker (adaptation/scripts/check_adaptation.py: the first checker of the stage whose
stage.toml sets `checks_packages`), run as a separate process: the adaptation stage's agent
escalation, the healer's agent escalation and the healing gate all accept a package only through it.
It is run by path, never imported, so no stage imports another."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from ascendbridge.gatekit.checker import checker_gate
from ascendbridge.package import uv_env
from ascendbridge.package.device_settings import DeviceSettings
from ascendbridge.stage_table import stage_table

CHECKER = next((row.package / row.checkers[0] for row in stage_table() if row.checks_packages), None)


class CheckSettings(DeviceSettings):
    """Where and how long the checker's dry run runs: the healing settings' device and demo timeout
    (HealingSettings extends this), so every caller checks a package the same way."""

    model_config = SettingsConfigDict(env_prefix="ASCENDBRIDGE_HEALING_")
    key_prefix = "healing_"

    demo_timeout_s: float = Field(uv_env.DEMO_TIMEOUT_S, gt=0)


def run_package_checker(name: str, root: Path, device: str, timeout_s: float) -> tuple[bool, str, dict[str, Any]]:
    """(passed, summary, report) of the package checker's full run (the demo included)."""
    if CHECKER is None:
        raise RuntimeError("no stage's stage.toml sets `checks_packages`: nothing can check a package")
    result = checker_gate(
        CHECKER,
        ["--adapt", name, "--adaptations-dir", str(root), "--device", device, "--timeout", str(timeout_s)],
        timeout_s + 600,
    )
    return result.passed, result.summary, result.report
