"""Serving settings (ascendbridge.settings): `--set serving.KEY`, then ASCENDBRIDGE_SERVING_*, then defaults."""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from ascendbridge.package.device_settings import DeviceSettings
from ascendbridge.settings import one_of
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
    bench_prompts: int = Field(8, ge=0)  # requests per rate of `vllm bench serve` (0: no benchmark)
    bench_rates: str = "1,4,inf"  # its request rates (requests/s; inf: all at once)
    bench_input_len: int = Field(16, ge=1)
    bench_output_len: int = Field(8, ge=2)
    bench_timeout_s: float = Field(900.0, gt=0)  # all rates together
    replay: int = Field(2, ge=1)  # acceptance requests the gate replays on a fresh server
    quantized: bool = True  # also serve each compressed-tensors checkpoint the quantization stage accepted
    ascend_generation: str = "A2"  # the Ascend generation the deployment artefacts target
    ascend_cards: int = Field(8, ge=1)  # Ascend cards of the plan when the task was given none (its claim wins)
    ascend_card_memory_gb: float = Field(64.0, gt=0)
    export_timeout_s: float = Field(900.0, gt=0)
    start_timeout_s: float = Field(600.0, gt=0)  # to /health: ~25-60 s on an idle CPU host, minutes on a loaded one
    request_timeout_s: float = Field(120.0, gt=0)

    @field_validator("bench_rates")
    @classmethod
    def _rates(cls, value: str) -> str:
        for rate in value.split(","):
            try:
                ok = rate == "inf" or float(rate) > 0
            except ValueError:
                ok = False
            if not ok:
                raise ValueError(f"bad serving bench_rates {value} (expected positive numbers or inf, comma-separated)")
        return value

    @field_validator("ascend_generation")
    @classmethod
    def _generation(cls, value: str) -> str:
        return one_of("serving ascend_generation", value, ASCEND_GENERATIONS)
