"""Discovery settings (ascendbridge.settings): `--set discovery.KEY`, then ASCENDBRIDGE_*, then defaults.

The stage's own section, registered under the `ascendbridge.settings` entry points like every
stage's. The kernel's Hub client (ascendbridge/discovery/hub.py) reads it by its section name, so the
kernel never imports this package. What discovery sizes models against is the kernel's `devices`
section (DeviceSettings).
"""

from __future__ import annotations

from pydantic import Field

from ascendbridge.settings import StageSettings


class DiscoverySettings(StageSettings):
    label = "discovery"

    hub_timeout: float = Field(10.0, gt=0)  # seconds per Hugging Face Hub request
