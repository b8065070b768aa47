"""Quantization settings (ascendbridge.settings): `--set quantization.KEY`, then
ASCENDBRIDGE_QUANTIZATION_*, then defaults."""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from ascendbridge.settings import StageSettings, one_of

# The schemes the reference forward executes (ab_runtime/quant/ascend_format.py EXECUTED_KINDS),
# each with msModelSlim's shipped default practice.
PRACTICES = {"W8A8_DYNAMIC": "default-w8a8", "W8A16": "default-w8a16"}


class QuantizationSettings(StageSettings):
    model_config = SettingsConfigDict(env_prefix="ASCENDBRIDGE_QUANTIZATION_")
    key_prefix = "quantization_"

    schemes: str = "W8A8_DYNAMIC,W8A16"  # tried in this order, comma-separated
    python: str = ""  # the tool environment's interpreter ("": .cache/quant-env, installed on first need)
    real_weights: bool = True  # quantize the model's real weights when they are available
    tool_timeout_s: float = Field(1800.0, gt=0)  # one `msmodelslim quant` run
    eval_timeout_s: float = Field(900.0, gt=0)  # one reference evaluation (run and gate)
    export_timeout_s: float = Field(900.0, gt=0)

    @field_validator("schemes")
    @classmethod
    def _schemes(cls, value: str) -> str:
        names = [s.strip() for s in value.split(",") if s.strip()]
        if not names:
            raise ValueError("bad quantization schemes '' (expected one or more of: W8A8_DYNAMIC, W8A16)")
        for name in names:
            one_of("quantization scheme", name, PRACTICES)
        return ",".join(names)

    def scheme_list(self) -> list[str]:
        return self.schemes.split(",")
