"""The settings every section shares whose runs use the package's environment on a device."""

from __future__ import annotations

from pydantic import Field, field_validator

from ascendbridge.package import uv_env
from ascendbridge.settings import StageSettings


class DeviceSettings(StageSettings):
    """`device` (ASCENDBRIDGE_DEVICE, shared by the stages: demo.py / the runs' --device, which
    selects the pyproject extra), validated once here, and the profile it selects."""

    device: str = Field("cpu", validation_alias="ascendbridge_device")

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        uv_env.profile_for_device(value)  # validates the device name (the error names the key)
        return value

    @property
    def profile(self) -> str:
        return uv_env.profile_for_device(self.device)
