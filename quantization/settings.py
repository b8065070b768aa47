"""Quantization settings (ascendbridge.settings): `--set quantization.KEY`, then
ASCENDBRIDGE_QUANTIZATION_*, then defaults."""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from ascendbridge.settings import StageSettings, one_of

# The schemes the reference forward executes (ab_runtime/quant/ascend_format.py EXECUTED_KINDS,
# ab_runtime/quant/ct_format.py CT_W8A8), each with the tool that makes it: msModelSlim with its
# shipped default practice, or LLM-Compressor with the stage's recipe (quantization/inner/llmcompressor_w8a8.py).
PRACTICES = {"W8A8_DYNAMIC": "default-w8a8", "W8A16": "default-w8a16"}
LLMCOMPRESSOR_SCHEMES = ("CT_W8A8",)
SCHEMES = (*PRACTICES, *LLMCOMPRESSOR_SCHEMES)


class QuantizationSettings(StageSettings):
    model_config = SettingsConfigDict(env_prefix="ASCENDBRIDGE_QUANTIZATION_")
    key_prefix = "quantization_"

    schemes: str = "W8A8_DYNAMIC,W8A16,CT_W8A8"  # tried in this order, comma-separated
    python: str = ""  # the tool environment's interpreter ("": .cache/quant-env, installed on first need)
    real_weights: bool = True  # quantize the model's real weights when they are available
    tool_timeout_s: float = Field(1800.0, gt=0)  # one `msmodelslim quant` or LLM-Compressor oneshot run
    eval_timeout_s: float = Field(900.0, gt=0)  # one reference evaluation (run and gate)
    export_timeout_s: float = Field(900.0, gt=0)

    @field_validator("schemes")
    @classmethod
    def _schemes(cls, value: str) -> str:
        names = [s.strip() for s in value.split(",") if s.strip()]
        if not names:
            raise ValueError(f"bad quantization schemes '' (expected one or more of: {', '.join(SCHEMES)})")
        for name in names:
            one_of("quantization scheme", name, SCHEMES)
        return ",".join(names)

    def scheme_list(self) -> list[str]:
        return self.schemes.split(",")
