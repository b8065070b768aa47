"""Discovery settings (ascendbridge.settings): `--set discovery.KEY`, then ASCENDBRIDGE_*, then defaults.
What discovery sizes models against is the kernel's `devices` section (DeviceSettings)."""

from __future__ import annotations

from pydantic import Field

from ascendbridge.settings import StageSettings


class DiscoverySettings(StageSettings):
    label = "discovery"

    hub_timeout: float = Field(10.0, gt=0)  # seconds per Hugging Face Hub request
