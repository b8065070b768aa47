"""Serving settings (ascendbridge.settings): `--set serving.KEY`, then ASCENDBRIDGE_SERVING_*, then defaults."""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from ascendbridge.package.device_settings import DeviceSettings
from serving.plan import ASCEND_GENERATIONS


class ServingSettings(DeviceSettings):
    model_config = SettingsConfigDict(env_prefix="ASCENDBRIDGE_SERVING_")
    key_prefix = "serving_"

    python: str = ""  # the serve environment's interpreter ("": .cache/serve-env, `python -m serving.env`)
    real_weights: bool = True  # serve the model's real weights when they are available
    max_model_len: int = Field(0, ge=0)  # 0: the model's own limit
    max_num_seqs: int = Field(4, ge=1)
    prompts: int = Field(3, ge=1)  # seeded prompts of the generation acceptance
    prompt_len: int = Field(8, ge=1)
    new_tokens: int = Field(8, ge=2)
    concurrency: int = Field(4, ge=2)  # requests sent at once
    replay: int = Field(2, ge=1)  # acceptance requests the gate replays on a fresh server
    ascend_generation: str = "A2"  # the Ascend generation the deployment artefacts target
    ascend_cards: int = Field(8, ge=1)  # cards per Ascend host, for the tensor-parallel rule
    ascend_card_memory_gb: float = Field(64.0, gt=0)
    export_timeout_s: float = Field(900.0, gt=0)
    start_timeout_s: float = Field(600.0, gt=0)  # to /health: ~25-60 s on an idle CPU host, minutes on a loaded one
    request_timeout_s: float = Field(120.0, gt=0)

    @field_validator("ascend_generation")
    @classmethod
    def _generation(cls, value: str) -> str:
        if value not in ASCEND_GENERATIONS:
            raise ValueError(f"bad serving ascend_generation {value} (expected: {', '.join(ASCEND_GENERATIONS)})")
        return value
